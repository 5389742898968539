//! `--threads N`: a file decoded in pieces on several threads gives the same output as the one
//! streamed on one thread, for a good file (stats, diagnose, trace) and a cut one (the same error
//! and exit status).

use std::path::Path;

mod common;
use common::{memlens, synth_workload};

#[test]
fn threads_give_the_same_output_as_one() {
    // 120k events: ~20 MB, cut in several pieces (at least 4 MiB each).
    let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join("threads_training.pickle");
    synth_workload(&p, "training", "120000", "5");
    let file = p.to_string_lossy().into_owned();
    for verb in [
        &["stats", "--json"][..],
        &["diagnose", "--json"],
        &["trace"],
    ] {
        let run = |threads: &str| {
            let mut args = verb.to_vec();
            args.extend(["--threads", threads, file.as_str()]);
            memlens(&args)
        };
        let one = run("1");
        assert!(
            one.status.success(),
            "{verb:?}: {}",
            String::from_utf8_lossy(&one.stderr)
        );
        for n in ["2", "3"] {
            let many = run(n);
            assert_eq!(
                many.status.code(),
                one.status.code(),
                "{verb:?} --threads {n}"
            );
            assert!(
                many.stdout == one.stdout,
                "{verb:?} --threads {n}: output differs"
            );
        }
    }
    let bytes = std::fs::read(&p).unwrap_or_default();
    let cut = Path::new(env!("CARGO_TARGET_TMPDIR")).join("threads_cut.pickle");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap_or_else(|e| panic!("{e}"));
    let cut = cut.to_string_lossy().into_owned();
    let one = memlens(&["stats", "--threads", "1", &cut]);
    let two = memlens(&["stats", "--threads", "2", &cut]);
    assert_eq!(one.status.code(), Some(2));
    assert_eq!(two.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&two.stderr),
        String::from_utf8_lossy(&one.stderr)
    );
}
