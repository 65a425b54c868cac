//! Dataset loaders on the real data in ../shared/data and on fixtures in the published formats.

use std::path::PathBuf;

use qrmem::eval::datasets::{load_hotpot, load_leval, load_longbench, load_quality_flat};
use qrmem::eval::metrics::{hotpot_f1, longbench_f1};

fn shared(rel: &str) -> Option<PathBuf> {
    let base = std::env::var_os("QRMEM_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let p = base.join(rel);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("SKIPPED: {} not found", p.display());
        None
    }
}

#[test]
fn hotpotqa_distractor_dev() {
    let Some(p) = shared("hotpotqa/hotpot_dev_distractor_dev500.json") else {
        return;
    };
    let items = load_hotpot(&p).unwrap();
    assert_eq!(items.len(), 500);
    let first = &items[0];
    assert_eq!(first.context.matches("Passage ").count(), 10);
    assert!(first.context.starts_with("Passage 1:\n"));
    assert_eq!(first.answers.len(), 1);
    assert_eq!(first.supporting.len(), 2, "{:?}", first.supporting);
    for s in &first.supporting {
        assert!(
            first.context.contains(&format!("\n{s}\n")),
            "supporting title {s} is a passage title"
        );
    }
    assert_eq!(hotpot_f1(&first.answers[0], &first.answers[0]), 1.0);
}

#[test]
fn leval_quality_and_qasper() {
    if let Some(p) = shared("quality/quality_dev5.jsonl") {
        let items = load_leval(&p, "quality").unwrap();
        assert_eq!(items.len(), 64);
        assert!(
            items
                .iter()
                .all(|i| i.options.len() == 4 && i.gold_letter.is_some()),
            "every question has 4 options and a letter"
        );
        assert_eq!(items[0].gold_letter.as_deref(), Some("C"));
        assert_eq!(items[0].options[2], "He was reduced to particles");
    }
    if let Some(p) = shared("qasper/qasper_dev8.jsonl") {
        let items = load_leval(&p, "qasper").unwrap();
        assert_eq!(items.len(), 66);
        assert!(items
            .iter()
            .all(|i| i.gold_letter.is_none() && !i.answers[0].is_empty()));
    }
}

#[test]
fn quality_flattened_format() {
    let Some(p) = shared("quality/quality_example.jsonl") else {
        return;
    };
    let items = load_quality_flat(&p).unwrap();
    assert_eq!(items.len(), 10);
    assert!(items
        .iter()
        .all(|i| i.options.len() == 4 && i.gold_letter.is_some()));
    assert!(!items[0].context.contains("<p>") && items[0].context.contains("THE GIRL IN HIS MIND"));
}

#[test]
fn longbench_fixture() {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/longbench_hotpotqa.jsonl");
    let items = load_longbench(&p).unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].id, "fixture-0001");
    assert_eq!(items[0].dataset, "hotpotqa");
    assert_eq!(
        longbench_f1("Lucerne, Switzerland", &items[0].answers),
        2.0 / 3.0
    );
}

#[test]
fn malformed_files_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.jsonl");
    std::fs::write(&p, "{\"input\": \"q\", \"context\": \"c\", \"answers\": [\"a\"], \"_id\": \"1\"}\n{\"input\": \"q\"\n").unwrap();
    let e = load_longbench(&p).unwrap_err().to_string();
    assert!(
        e.contains("bad.jsonl line 2") && e.contains("not JSON"),
        "{e}"
    );
    std::fs::write(
        &p,
        "{\"input\": \"q\", \"context\": \"c\", \"_id\": \"1\"}\n",
    )
    .unwrap();
    let e = load_longbench(&p).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("answers"), "{e}");
}

#[test]
fn longbench_style_generation_is_deterministic_and_clean() {
    let Some(p) = shared("hotpotqa/hotpot_dev_distractor_dev500.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &str, name: &str| {
        let out = dir.path().join(name);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_qrmem"))
            .args(["data", "longbench-style", "--in"])
            .arg(&p)
            .arg("--out")
            .arg(&out)
            .args(["--words", "9000", "--seed", seed, "--limit", "3"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(&out).unwrap()
    };
    let (a, b, c) = (
        run("7", "a.jsonl"),
        run("7", "b.jsonl"),
        run("8", "c.jsonl"),
    );
    assert_eq!(a, b, "same seed, same output");
    assert_ne!(a, c, "another seed shuffles otherwise");
    let items = load_longbench(&dir.path().join("a.jsonl")).unwrap();
    let originals = load_hotpot(&p).unwrap();
    assert_eq!(items.len(), 3);
    for (item, orig) in items.iter().zip(&originals) {
        assert_eq!(item.dataset, "hotpotqa-longbench-style");
        assert_eq!(
            (item.id.as_str(), item.question.as_str()),
            (orig.id.as_str(), orig.question.as_str())
        );
        let words = item.context.split_whitespace().count();
        assert!((9000..12000).contains(&words), "about 9000 words: {words}");
        let titles: Vec<&str> = item
            .context
            .split("\n\n")
            .map(|p| p.lines().nth(1).unwrap_or(""))
            .collect();
        let unique: std::collections::HashSet<&&str> = titles.iter().collect();
        assert_eq!(unique.len(), titles.len(), "no repeated titles");
        for s in &orig.supporting {
            assert!(
                titles.contains(&s.as_str()),
                "the supporting paragraph {s} is kept"
            );
        }
        assert!(item.context.starts_with("Passage 1:\n"));
    }
}
