//! The real local LLM for end-to-end tests: llama.cpp's llama-server with the packaged GGUF,
//! as installed by scripts/setup-local-llm.sh.
//!
//! The first test that asks starts one server for the whole test binary on a free loopback port.
//! It runs under a small shell wrapper that holds the test process's pipe: when the test process
//! exits (however it exits), the pipe closes and the wrapper stops the server. Tests take
//! [`serial`] so that only one prompt runs at a time on the 2-core machine.
//!
//! `QRMEM_TEST_LLM_URL` points the tests at a server that is already running instead.
//! When the install is missing, the tests fail if `QRMEM_REQUIRE_LLM=1` (CI sets it) and are
//! skipped with a message otherwise.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

pub struct LocalLlm {
    pub base_url: String,
    pub model: String,
    _child: Option<Mutex<Child>>,
}

/// (model key, GGUF file, alias served).
const MODELS: &[(&str, &str, &str)] = &[
    (
        "0.5b",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "qwen2.5-coder-0.5b-instruct",
    ),
    (
        "1.5b",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "qwen2.5-coder-1.5b-instruct",
    ),
    (
        "135m",
        "smollm2-135m-instruct-q4_1.gguf",
        "smollm2-135m-instruct",
    ),
];

fn qrmem_home() -> PathBuf {
    std::env::var_os("QRMEM_CACHE")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/qrmem")
        })
}

/// One test at a time against the real model.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running local LLM, or None (with a message) when it is not installed and not required.
/// A server that failed to start fails every test that asks, at once and with the first
/// failure's message: the start is tried once per test binary, never once per test.
pub fn local_llm() -> Option<&'static LocalLlm> {
    static LLM: OnceLock<Result<Option<LocalLlm>, String>> = OnceLock::new();
    match LLM.get_or_init(start) {
        Ok(llm) => llm.as_ref(),
        Err(e) => panic!("{e}"),
    }
}

fn required() -> bool {
    std::env::var("QRMEM_REQUIRE_LLM")
        .map(|v| v == "1")
        .unwrap_or(false)
}

fn start() -> Result<Option<LocalLlm>, String> {
    let key = std::env::var("QRMEM_TEST_MODEL").unwrap_or_else(|_| "0.5b".into());
    let (_, file, alias) = MODELS
        .iter()
        .find(|(k, _, _)| *k == key)
        .unwrap_or_else(|| panic!("QRMEM_TEST_MODEL={key}: expected 0.5b, 1.5b or 135m"));
    if let Ok(url) = std::env::var("QRMEM_TEST_LLM_URL") {
        return Ok(Some(LocalLlm {
            base_url: url,
            model: alias.to_string(),
            _child: None,
        }));
    }
    let home = qrmem_home();
    let server = home.join("bin/llama-server");
    let model = home.join("models").join(file);
    if !server.is_file() || !model.is_file() {
        let msg = format!(
            "the local LLM is not installed ({} / {}); run scripts/setup-local-llm.sh --model {key}",
            server.display(),
            model.display()
        );
        if required() {
            return Err(format!("{msg} (QRMEM_REQUIRE_LLM=1)"));
        }
        eprintln!("SKIPPED real-LLM test: {msg}");
        return Ok(None);
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Under target/tmp (cargo's scratch directory for integration tests), not the system's
    // temporary directory: a run leaves its server log for a failure to point at, and
    // `cargo clean` removes it.
    let log = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("qrmem-test-llama-{port}.log"));
    let threads = std::env::var("QRMEM_TEST_LLM_THREADS").unwrap_or_else(|_| "2".into());
    // The wrapper exits with the server (so `try_wait` sees a server that died), and stops it
    // when the test process's pipe closes. The pipe is kept on fd 3: a background list's
    // standard input is /dev/null in a non-interactive shell.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"exec 3<&0; log="$1"; shift; "$@" >"$log" 2>&1 & s=$!; (cat <&3 >/dev/null; kill $s 2>/dev/null) & wait $s"#)
        .arg("sh")
        .arg(&log)
        .arg(&server)
        .args(["-m"])
        .arg(&model)
        .args(["-c", "8192", "-np", "1", "-t", &threads, "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args(["--alias", alias, "--no-webui"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn llama-server wrapper");
    let started = Instant::now();
    let failure = loop {
        if health(port) {
            eprintln!(
                "local LLM up on port {port} after {:.1} s",
                started.elapsed().as_secs_f64()
            );
            return Ok(Some(LocalLlm {
                base_url: format!("http://127.0.0.1:{port}/v1"),
                model: alias.to_string(),
                _child: Some(Mutex::new(child)),
            }));
        }
        if let Ok(Some(status)) = child.try_wait() {
            break format!(
                "llama-server exited during start ({status}) after {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        if started.elapsed() >= Duration::from_secs(180) {
            break "llama-server did not become healthy in 180 s".to_string();
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    // Closing the pipe makes the wrapper stop the server (if it still runs) and exit.
    drop(child.stdin.take());
    let _ = child.wait();
    let tail = std::fs::read_to_string(&log).unwrap_or_default();
    Err(format!("{failure}; log {}:\n{tail}", log.display()))
}

fn health(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200")
}
