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
        // The written file keeps the question type (its "type" field), and reads back.
        assert!(item.kind.is_some());
        assert_eq!(item.kind, orig.kind);
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

/// 2WikiMultihopQA and MuSiQue (issue 67): the real dev samples in ../shared/data, in their own
/// setting and LongBench-style; gold evidence is the supporting sentences (2Wiki) and the
/// supporting paragraphs whole (MuSiQue).
#[test]
fn two_wiki_and_musique_dev_samples() {
    use qrmem::eval::datasets::{load_2wiki_raw, load_musique_raw};
    let (Some(wiki), Some(musique)) = (
        shared("2wikimultihopqa/2wiki_dev40.json"),
        shared("musique/musique_dev30.jsonl"),
    ) else {
        return;
    };
    let raw = load_2wiki_raw(&wiki).unwrap();
    assert_eq!(raw.len(), 40);
    let kinds: std::collections::BTreeSet<&str> = raw.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "bridge_comparison",
            "comparison",
            "compositional",
            "inference"
        ]
        .into()
    );
    let (items, notes) = qrmem::eval::items::load("2wiki", &wiki, None, 0, 0).unwrap();
    assert!(notes.is_empty());
    assert_eq!(items.len(), 40);
    for (item, r) in items.iter().zip(&raw) {
        assert_eq!(item.dataset, "2wikimqa");
        // The question type goes with the item, for the report's split by kind.
        assert_eq!(item.kind.as_deref(), Some(r.kind.as_str()));
        assert_eq!(
            item.context.matches("\nPassage ").count() + 1,
            r.paragraphs.len()
        );
        let gold = item.gold_spans.as_ref().unwrap();
        assert!(!gold.is_empty(), "{}", item.id);
        // Every gold span is the text of one supporting sentence.
        for &(a, b) in gold {
            let text = &item.context[a..b];
            assert!(
                r.gold
                    .iter()
                    .any(|&(p, k)| r.paragraphs[p].1[k.unwrap()].trim() == text),
                "{}: {text}",
                item.id
            );
        }
    }
    let (long, notes) =
        qrmem::eval::items::load("2wiki-longbench-style", &wiki, None, 0, 4900).unwrap();
    assert!(notes[0].contains("2WikiMultihopQA"), "{notes:?}");
    assert_eq!(long[0].dataset, "2wikimqa-longbench-style");
    for (l, item) in long.iter().zip(&items) {
        let words = l.context.split_whitespace().count();
        assert!((4000..7000).contains(&words), "{words} words");
        let texts = |i: &qrmem::eval::datasets::QaItem| {
            let mut v: Vec<String> = i
                .gold_spans
                .as_ref()
                .unwrap()
                .iter()
                .map(|&(a, b)| i.context[a..b].to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(texts(l), texts(item), "the same gold sentences, moved");
        assert_eq!(l.kind, item.kind);
    }

    let raw = load_musique_raw(&musique).unwrap();
    assert_eq!(raw.len(), 30);
    let hops = |k: &str| raw.iter().filter(|r| r.kind == k).count();
    assert_eq!((hops("2hop"), hops("3hop"), hops("4hop")), (17, 8, 5));
    let (long, _) =
        qrmem::eval::items::load("musique-longbench-style", &musique, None, 0, 11200).unwrap();
    assert_eq!(long.len(), 30);
    for (l, r) in long.iter().zip(&raw) {
        assert_eq!(l.dataset, "musique-longbench-style");
        assert_eq!(l.answers[0], r.answers[0]);
        assert_eq!(l.kind.as_deref(), Some(r.kind.as_str()));
        assert!(!l.answers.is_empty());
        // Every supporting paragraph is gold whole, each once, even where titles repeat.
        let gold = l.gold_spans.as_ref().unwrap();
        assert_eq!(gold.len(), r.gold.len(), "{}", r.id);
        for &(p, k) in &r.gold {
            assert_eq!(k, None);
            let text = r.paragraphs[p].1[0].trim();
            assert!(
                gold.iter().any(|&(a, b)| &l.context[a..b] == text),
                "{}",
                r.id
            );
        }
        // Each item keeps all its own paragraphs, repeated titles included.
        for (title, text) in &r.paragraphs {
            assert!(
                l.context.contains(&format!("\n{title}\n{}", text[0])),
                "{}",
                r.id
            );
        }
    }
    // The same seed gives the same contexts.
    let (again, _) =
        qrmem::eval::items::load("musique-longbench-style", &musique, Some(3), 0, 11200).unwrap();
    assert_eq!(again[2].context, long[2].context);
}

/// A real item of each format with a field taken out is refused, naming the file, where the
/// item is and the field.
#[test]
fn malformed_two_wiki_and_musique_items_name_file_place_and_field() {
    use qrmem::eval::datasets::{load_2wiki_raw, load_musique_raw};
    let (Some(wiki), Some(musique)) = (
        shared("2wikimultihopqa/2wiki_dev40.json"),
        shared("musique/musique_dev30.jsonl"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut items: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&wiki).unwrap()).unwrap();
    items.truncate(3);
    items[2].as_object_mut().unwrap().remove("question");
    let p = dir.path().join("2wiki.json");
    std::fs::write(&p, serde_json::to_string(&items).unwrap()).unwrap();
    let e = load_2wiki_raw(&p).unwrap_err().to_string();
    assert!(
        e.contains("2wiki.json") && e.contains("item 2") && e.contains("question"),
        "{e}"
    );

    let lines: Vec<String> = std::fs::read_to_string(&musique)
        .unwrap()
        .lines()
        .take(2)
        .map(String::from)
        .collect();
    let mut second: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    for p in second["paragraphs"].as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("paragraph_text");
    }
    let p = dir.path().join("musique.jsonl");
    std::fs::write(&p, format!("{}\n{}\n", lines[0], second)).unwrap();
    let e = load_musique_raw(&p).unwrap_err().to_string();
    assert!(
        e.contains("musique.jsonl line 2") && e.contains("paragraph_text"),
        "{e}"
    );
    // No supporting paragraph: no gold evidence to measure, refused.
    let mut first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    for p in first["paragraphs"].as_array_mut().unwrap() {
        p["is_supporting"] = serde_json::Value::Bool(false);
    }
    std::fs::write(&p, format!("{first}\n")).unwrap();
    let e = load_musique_raw(&p).unwrap_err().to_string();
    assert!(
        e.contains("musique.jsonl line 1") && e.contains("is_supporting"),
        "{e}"
    );
}
