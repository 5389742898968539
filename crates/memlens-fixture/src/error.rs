//! Why a fixture text could not be turned into bytes.

use std::io;
use thiserror::Error;

/// Why a fixture text could not be turned into bytes. Line numbers count from 1.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FixtureError {
    #[error("line {line}: unknown command `{word}`")]
    UnknownCommand { line: usize, word: String },
    #[error("line {line}: `{command}` needs {what}")]
    Missing {
        line: usize,
        command: String,
        what: &'static str,
    },
    #[error("line {line}: bad {what} `{text}`")]
    Bad {
        line: usize,
        what: &'static str,
        text: String,
    },
    #[error("line {line}: unknown option `{key}=` for `{command}`")]
    UnknownOption {
        line: usize,
        command: String,
        key: String,
    },
    #[error("line {line}: unexpected `{text}` after `{command}`")]
    Extra {
        line: usize,
        command: String,
        text: String,
    },
    #[error("line {line}: unknown allocation `{name}` (no live `alloc {name}` before it)")]
    UnknownName { line: usize, name: String },
    #[error("line {line}: unknown stack `@{name}` (define it with `stack {name} …` first)")]
    UnknownStack { line: usize, name: String },
    #[error("line {line}: `block` before any `segment`")]
    BlockOutsideSegment { line: usize },
    #[error("line {line}: unterminated quote")]
    UnterminatedQuote { line: usize },
    #[error("line {line}: {what}")]
    Invalid { line: usize, what: String },
    #[error("writing the fixture failed: {0}")]
    Write(String),
}

impl From<io::Error> for FixtureError {
    fn from(e: io::Error) -> Self {
        FixtureError::Write(e.to_string())
    }
}
