//! `memlens export SNAPSHOT... --format parquet -o DIR`: the model as columnar tables for the
//! engines fleets are queried with (DuckDB, Polars, Spark). Each table is a folder of Parquet
//! files, one per input file (`DIR/TABLE/NNNNN.parquet`, `NNNNN` its position on the command
//! line), every row naming its `file` and `rank` (from names like `rank_7.pickle`). The files
//! are read and written in parallel (`crate::load::map_files`); a file that does not load is
//! named and makes the exit status 2, the others are still written.

mod part;
mod tables;

use crate::load::CliError;
use memlens_core::Snapshot;
use part::{Part, Source};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Apache Parquet, snappy-compressed.
    Parquet,
}

#[derive(clap::Args)]
pub struct Args {
    /// Snapshot files (pickle of any protocol, JSON, or _memory_viz HTML); `-` reads stdin.
    #[arg(required = true)]
    files: Vec<String>,
    /// Table format.
    #[arg(long, value_enum, default_value = "parquet")]
    format: Format,
    /// Output folder (created if missing); it must not hold an export already.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
}

pub fn run(a: Args) -> Result<(), CliError> {
    let Format::Parquet = a.format;
    prepare(&a.output)?;
    let dir = a.output.as_path();
    let results = crate::load::map_files(&a.files, |index, file, snap| {
        let source = Source {
            file,
            rank: rank_of(file),
            index,
        };
        write_file(dir, &source, &snap)
    });
    let results = results.into_iter().map(|r| r.and_then(|w| w)).collect();
    crate::load::report_files(&a.files, results, |_, _, ()| Ok(()))
}

/// Creates the output folder and one folder per table; refuses a folder that already holds
/// parts (a second export into it would mix two runs' rows).
fn prepare(dir: &Path) -> Result<(), CliError> {
    for t in &tables::TABLES {
        let d = dir.join(t.name);
        std::fs::create_dir_all(&d)
            .map_err(|e| CliError(format!("cannot create folder: {e}: {}", d.display())))?;
        let used = std::fs::read_dir(&d)
            .map_err(|e| CliError(format!("cannot read folder: {e}: {}", d.display())))?
            .next()
            .is_some();
        if used {
            return Err(CliError(format!(
                "output folder already holds an export (remove it or choose another): {}",
                d.display()
            )));
        }
    }
    Ok(())
}

/// Writes every table's part of one snapshot; on failure removes the parts already written.
fn write_file(dir: &Path, source: &Source, snap: &Snapshot) -> Result<(), CliError> {
    let mut written = Vec::new();
    let r = tables::TABLES.iter().enumerate().try_for_each(|(i, t)| {
        let mut p = Part::create(dir, t, source)?;
        written.push(p.path.clone());
        tables::write(i, snap, &mut p)?;
        p.close()
    });
    if r.is_err() {
        for w in written {
            let _ = std::fs::remove_file(w);
        }
    }
    r.map_err(|e| CliError(format!("{e}: {}", source.file)))
}

/// The rank in a file name: the digits after the last `rank` in its name (`rank_7.pickle`,
/// `snapshot-rank3.pkl`, `rank-12.pickle`; case ignored), `_` or `-` allowed between.
pub fn rank_of(path: &str) -> Option<u32> {
    let name = Path::new(path).file_name()?.to_str()?.to_ascii_lowercase();
    let at = name.rfind("rank")? + "rank".len();
    let rest = name[at..].trim_start_matches(['_', '-']);
    let digits: &str = &rest[..rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len())];
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::rank_of;

    #[test]
    fn rank_comes_from_the_file_name() {
        assert_eq!(rank_of("run1/rank_7.pickle"), Some(7));
        assert_eq!(rank_of("snapshot-Rank3.pkl"), Some(3));
        assert_eq!(rank_of("/a/rank-12.pickle"), Some(12));
        assert_eq!(rank_of("rank_2/snapshot.pickle"), None);
        assert_eq!(rank_of("ranking.pickle"), None);
        assert_eq!(rank_of("snapshot.pickle"), None);
        assert_eq!(rank_of("-"), None);
    }
}
