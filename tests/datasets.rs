//! Dataset loaders on the real data in ../shared/data and on fixtures in the published formats.

mod common;

use std::path::PathBuf;

use qrmem::eval::datasets::{
    load_hotpot, load_hotpot_raw, load_leval, load_longbench, load_quality_flat, HotpotRaw, QaItem,
};
use qrmem::eval::metrics::{hotpot_f1, longbench_f1};

fn shared(rel: &str) -> Option<PathBuf> {
    common::shared_data(rel)
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
    let (Some(quality), Some(qasper)) = (
        shared("quality/quality_dev5.jsonl"),
        shared("qasper/qasper_dev8.jsonl"),
    ) else {
        return;
    };
    let items = load_leval(&quality, "quality").unwrap();
    assert_eq!(items.len(), 64);
    assert!(
        items
            .iter()
            .all(|i| i.options.len() == 4 && i.gold_letter.is_some()),
        "every question has 4 options and a letter"
    );
    assert_eq!(items[0].gold_letter.as_deref(), Some("C"));
    assert_eq!(items[0].options[2], "He was reduced to particles");
    assert!(
        items.iter().all(|i| i.gold_spans.is_none()),
        "no gold evidence: n/a"
    );
    let items = load_leval(&qasper, "qasper").unwrap();
    assert_eq!(items.len(), 66);
    assert!(items
        .iter()
        .all(|i| i.gold_letter.is_none() && !i.answers[0].is_empty()));
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
        assert_gold_spans_are_the_supporting_sentences(item, &raw_item(&p, &item.id));
    }
}

fn raw_item(path: &std::path::Path, id: &str) -> HotpotRaw {
    load_hotpot_raw(path)
        .unwrap()
        .into_iter()
        .find(|r| r.id == id)
        .unwrap()
}

/// Every gold span is the text of one supporting sentence (trimmed), and every supporting
/// sentence that exists has its span.
fn assert_gold_spans_are_the_supporting_sentences(item: &QaItem, raw: &HotpotRaw) {
    let gold = item
        .gold_spans
        .as_ref()
        .expect("HotpotQA items have gold evidence");
    let mut want: Vec<&str> = raw
        .supporting_facts
        .iter()
        .filter_map(|(title, k)| {
            let p = raw.context.iter().find(|p| &p.0 == title)?;
            p.1.get(usize::try_from(*k).ok()?).map(|s| s.trim())
        })
        .filter(|s| !s.is_empty())
        .collect();
    want.sort_unstable();
    want.dedup();
    let mut got: Vec<&str> = gold.iter().map(|&(a, b)| &item.context[a..b]).collect();
    got.sort_unstable();
    assert_eq!(got, want, "item {}", item.id);
    assert!(!gold.is_empty());
}

#[test]
fn hotpot_gold_spans_point_at_the_supporting_sentences() {
    let Some(p) = shared("hotpotqa/hotpot_dev_distractor_dev500.json") else {
        return;
    };
    let items = load_hotpot(&p).unwrap();
    let raw = load_hotpot_raw(&p).unwrap();
    for (item, r) in items.iter().zip(&raw).take(50) {
        assert_gold_spans_are_the_supporting_sentences(item, r);
    }
    // The LongBench-style items of the committed run (seed 0, 9,000 words): the same
    // documents as before gold spans were added (the first one's hash is in builds.jsonl), and
    // spans that point at the supporting sentences.
    let (long, _) = qrmem::eval::items::load("longbench-style", &p, Some(30), 0, 9000).unwrap();
    use sha2::Digest;
    let key = hex::encode(sha2::Sha256::digest(long[0].context.as_bytes()));
    assert_eq!(&key[..16], "e9b7ba6a0c41bf8c");
    for item in &long {
        let r = raw.iter().find(|r| r.id == item.id).unwrap();
        assert_gold_spans_are_the_supporting_sentences(item, r);
    }
}

#[test]
fn gold_spans_of_a_hand_made_item() {
    use qrmem::eval::datasets::{render_sentences, supporting_spans};
    let paragraphs = vec![
        (
            "Alpha".to_string(),
            vec!["A one.".to_string(), " A two.".to_string()],
        ),
        (
            "Beta".to_string(),
            vec!["B one.".to_string(), " B two.".to_string()],
        ),
    ];
    let (text, ranges) = render_sentences(&paragraphs);
    assert_eq!(
        text,
        qrmem::eval::datasets::render_passages(&[
            ("Alpha".into(), "A one. A two.".into()),
            ("Beta".into(), "B one. B two.".into())
        ])
    );
    let facts = vec![
        ("Beta".to_string(), 1),
        ("Alpha".to_string(), 0),
        ("Alpha".to_string(), 7),
        ("Gamma".to_string(), 0),
    ];
    let (spans, skipped) = supporting_spans(&["Alpha", "Beta"], &ranges, &facts);
    let texts: Vec<&str> = spans.iter().map(|&(a, b)| &text[a..b]).collect();
    assert_eq!(texts, vec!["A one.", "B two."]);
    assert_eq!(
        skipped, 2,
        "an index out of range and a title not in the document"
    );
}

#[test]
fn malformed_hotpot_leval_and_quality_files_name_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hotpot.json");
    // The second item lacks its question (on line 3).
    std::fs::write(
        &p,
        "[{\"_id\": \"a\", \"question\": \"q\", \"answer\": \"x\", \"context\": []},\n\n {\"_id\": \"b\", \"answer\": \"y\", \"context\": []}]\n",
    )
    .unwrap();
    let e = load_hotpot(&p).unwrap_err().to_string();
    assert!(
        e.contains("hotpot.json line 3") && e.contains("question"),
        "{e}"
    );

    let p = dir.path().join("leval.jsonl");
    std::fs::write(
        &p,
        "{\"input\": \"doc\", \"instructions\": [\"Q?\"], \"outputs\": [\"A\"]}\n{\"input\": \"doc\", \"outputs\": [\"A\"]}\n",
    )
    .unwrap();
    let e = load_leval(&p, "qasper").unwrap_err().to_string();
    assert!(
        e.contains("leval.jsonl line 2") && e.contains("\"instructions\""),
        "{e}"
    );
    // A multiple-choice output without an option letter names its line and output.
    std::fs::write(
        &p,
        "{\"input\": \"doc\", \"instructions\": [\"Q?\\n(A) x\\n(B) y\"], \"outputs\": [\"x\"]}\n",
    )
    .unwrap();
    let e = load_leval(&p, "quality").unwrap_err().to_string();
    assert!(
        e.contains("leval.jsonl line 1") && e.contains("output 1 has no option letter"),
        "{e}"
    );

    let p = dir.path().join("quality.jsonl");
    std::fs::write(
        &p,
        "{\"article_id\": \"1\", \"article\": \"<p>Text</p>\", \"question1\": \"Q?\", \"question1option1\": \"a\", \"question1option2\": \"b\", \"question1_gold_label\": 2}\n{\"article_id\": \"2\", \"article\": \"<p>Text</p>\", \"question1\": \"Q?\", \"question1option1\": \"a\", \"question1_gold_label\": 3}\n",
    )
    .unwrap();
    let e = load_quality_flat(&p).unwrap_err().to_string();
    assert!(
        e.contains("quality.jsonl line 2") && e.contains("question1_gold_label 3"),
        "{e}"
    );
    std::fs::write(&p, "{\"article_id\": \"1\"}\n").unwrap();
    let e = load_quality_flat(&p).unwrap_err().to_string();
    assert!(
        e.contains("quality.jsonl line 1") && e.contains("\"article\""),
        "{e}"
    );
}
