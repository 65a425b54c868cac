//! Embedder throughput: sentences/s at batch 32 for the packaged all-MiniLM-L6-v2, per thread
//! count. `cargo bench --bench embed` (full: 512 sentences per setting); QRMEM_BENCH_QUICK=1,
//! or a debug build (`cargo test --all-targets` in CI), runs 64 sentences so it cannot rot.

use std::time::Instant;

use qrmem::embed::{BertEmbedder, Embedder};

fn main() {
    let dir = std::env::var_os("QRMEM_EMBED_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| qrmem::config::qrmem_home().join("models/all-MiniLM-L6-v2"));
    if !dir.join("model.safetensors").is_file() {
        eprintln!(
            "embed bench: no model at {} (scripts/setup-embedder.sh); nothing measured",
            dir.display()
        );
        return;
    }
    // `cargo test --all-targets` runs this in the debug profile: quick mode there.
    let quick =
        cfg!(debug_assertions) || std::env::var("QRMEM_BENCH_QUICK").is_ok_and(|v| v == "1");
    let n = if quick { 64 } else { 512 };
    // Sentences of 12-30 words, like entity-relation edge texts and short questions.
    let words = [
        "bridge", "engineer", "river", "designed", "opened", "city", "born", "market", "tower",
        "railway", "company", "flood",
    ];
    let sentences: Vec<String> = (0..n)
        .map(|i| {
            let len = 12 + (i * 7) % 19;
            (0..len)
                .map(|j| words[(i * 31 + j * 17) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "embed bench: model {}, batch 32, {n} sentences of 12-30 words, {cpus} CPUs",
        dir.display()
    );
    for threads in [1usize, 2] {
        let e = match BertEmbedder::load(&dir, None, 32, threads) {
            Ok(e) => e,
            Err(err) => {
                eprintln!("embed bench: {err}");
                std::process::exit(1);
            }
        };
        let _ = e.embed(&refs[..32.min(refs.len())]); // warm-up
        let start = Instant::now();
        let out = e.embed(&refs).unwrap_or_else(|err| {
            eprintln!("embed bench: {err}");
            std::process::exit(1);
        });
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(out.len(), n);
        println!(
            "threads {threads}: {:.1} sentences/s ({secs:.2} s for {n})",
            n as f64 / secs
        );
    }
}
