//! Configuration: every parameter of the pipeline in one TOML file (`qrmem.toml`), overridable
//! by environment variables (`QRMEM_<SECTION>_<KEY>`) and then by command-line flags.
//!
//! Precedence, lowest first: built-in defaults, the file, the environment, flags (applied by the
//! binary on the returned [`Config`]). The API key is the one exception: it is read from the
//! environment only (`QRMEM_LLM_API_KEY`), is never accepted in the file, and is held in a
//! [`Secret`] that never prints, serialises or hashes its value.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

mod vocabulary;

pub use vocabulary::{ExtractionFormat, FinalContext, NavMethod, Order};

/// The environment variable that names the configuration file when `--config` is not given.
pub const CONFIG_ENV: &str = "QRMEM_CONFIG";
/// The environment variable holding the LLM API key (the only place a key is read from).
pub const API_KEY_ENV: &str = "QRMEM_LLM_API_KEY";
/// The file looked for in the working directory when no path is given.
pub const DEFAULT_CONFIG_FILE: &str = "qrmem.toml";

/// A secret string (an API key). `Debug` and `Display` print `<redacted>`; it has no `Serialize`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(Option<String>);

impl Secret {
    pub fn new(value: Option<String>) -> Self {
        Secret(value.filter(|v| !v.is_empty()))
    }
    /// The value, for the one place that needs it: the `Authorization` header.
    pub fn expose(&self) -> Option<&str> {
        self.0.as_deref()
    }
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "<redacted>"
        } else {
            "<unset>"
        })
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// How structured (JSON) output is requested from the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JsonMode {
    /// `json_schema` first; if the server rejects it, `json_object` from then on.
    Auto,
    JsonSchema,
    JsonObject,
    /// No `response_format`; the reply is parsed tolerantly all the same.
    None,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// One or more OpenAI-compatible base URLs (ending in `/v1`), balanced round-robin.
    pub base_urls: Vec<String>,
    /// The model name sent with every request (llama-server: its `--alias`).
    pub model: String,
    /// Per-request timeout, seconds.
    pub timeout_secs: f64,
    /// Transport retries (429, 5xx, timeouts, dropped connections) after the first attempt.
    pub max_retries: u32,
    /// First backoff delay, milliseconds; doubles each retry, with full jitter.
    pub backoff_base_ms: u64,
    /// Cap on one backoff delay (and on an honoured `Retry-After`), milliseconds.
    pub backoff_max_ms: u64,
    /// Requests in flight at once, shared by every caller of one client.
    pub concurrency: usize,
    pub json_mode: JsonMode,
    /// Reply budget per request, tokens.
    pub max_tokens: u32,
    /// Small models loop under greedy decoding; a frequency penalty stops that.
    pub frequency_penalty: f32,
    /// The first attempt at a structured reply runs at this temperature (the paper: 0).
    pub temperature: f32,
    /// Unparsable structured replies are retried this many times (the paper: 4) ...
    pub json_retries: u32,
    /// ... at this temperature (the paper: 0.7).
    pub retry_temperature: f32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_urls: vec!["http://127.0.0.1:8080/v1".to_string()],
            model: "qwen2.5-coder-0.5b-instruct".to_string(),
            timeout_secs: 300.0,
            max_retries: 5,
            backoff_base_ms: 500,
            backoff_max_ms: 30_000,
            concurrency: 1,
            json_mode: JsonMode::Auto,
            max_tokens: 512,
            frequency_penalty: 0.5,
            temperature: 0.0,
            json_retries: 4,
            retry_temperature: 0.7,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    pub enabled: bool,
    /// Directory of the content-addressed reply cache.
    pub dir: PathBuf,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: true,
            dir: qrmem_home().join("llm-cache"),
        }
    }
}

/// Whether the embedder L2-normalises its vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Normalize {
    Auto,
    True,
    False,
}

impl Normalize {
    pub fn as_option(self) -> Option<bool> {
        match self {
            Normalize::Auto => None,
            Normalize::True => Some(true),
            Normalize::False => Some(false),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedConfig {
    /// A Hugging Face style model directory (config.json, tokenizer.json or vocab.txt,
    /// model.safetensors). Default: the packaged all-MiniLM-L6-v2 installed by the setup.
    pub model_dir: PathBuf,
    /// L2-normalise vectors: "auto" (as the model directory's sentence-transformers
    /// modules.json says; Contriever has none and uses raw dot products), "true" or "false".
    pub normalize: Normalize,
    pub batch_size: usize,
    pub threads: usize,
    /// libtorch directory (`LIBTORCH` is honoured too).
    pub libtorch_dir: PathBuf,
}

impl Default for EmbedConfig {
    fn default() -> Self {
        EmbedConfig {
            model_dir: qrmem_home().join("models").join("all-MiniLM-L6-v2"),
            normalize: Normalize::Auto,
            batch_size: 32,
            threads: 1,
            libtorch_dir: qrmem_home().join("libtorch"),
        }
    }
}

/// Memory construction (QRMeM section 2.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Segment length in cl100k tokens (the paper: 600).
    pub segment_tokens: usize,
    /// A generated question joins the pool only if its ROUGE-L with every pooled one is below this.
    pub question_rouge_threshold: f64,
    /// String similarity (Jaro-Winkler) at or above which two normalised entity names merge.
    pub entity_similarity: f64,
    /// Ablation (paper Table 2): no question generation or graph update.
    pub graph_update: bool,
    /// Ablation (paper Table 2): schema extractor only, no LLM entity recognition.
    pub open_entity: bool,
    /// Relation Update calls at most per build (entity pairs related in several segments); a
    /// build also makes at most one per four segments, so the calls per segment stay bounded.
    pub max_relation_updates: usize,
    /// Reply budget of the joint extraction call (its reply is long lists of entities,
    /// relations and questions; the general `llm.max_tokens` is for short replies).
    pub extraction_max_tokens: u32,
    /// Frequency penalty of the joint extraction call: 0, since its replies repeat keys and
    /// entity names by design (eval/perf.md measures 0 against 0.5).
    pub extraction_frequency_penalty: f32,
    /// Stop an extraction reply once its triple list receives a triple it already holds this
    /// many times, keeping what came before (0: never). The reply is streamed to do it. Default
    /// 2: about half the build's wall time at the same density (eval/perf.md section 7).
    pub extraction_cut_repeats: u8,
    /// The extraction reply's format: `paper` or `compact` (eval/perf.md section 7).
    pub extraction_format: ExtractionFormat,
    /// Entities an extraction reply may list (the schema's `maxItems`). Default 8 (25 before
    /// issue 56): the schema extractor finds most of a segment's names and the 0.5B model
    /// filled the long list with copies; on three documents the short list cut the completion
    /// tokens per segment from 482 to 352 and left more edges, 4.14 per segment against 3.47
    /// (eval/perf.md section 7).
    pub extraction_max_entities: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            segment_tokens: 600,
            question_rouge_threshold: 0.6,
            entity_similarity: 0.92,
            graph_update: true,
            open_entity: true,
            max_relation_updates: 100,
            extraction_max_tokens: 2048,
            extraction_frequency_penalty: 0.0,
            extraction_cut_repeats: 2,
            extraction_format: ExtractionFormat::Paper,
            extraction_max_entities: 8,
        }
    }
}

/// The extraction reply's entity list at most in every memory built before
/// `memory.extraction_max_entities` was an option (its default is 8 since; a memory file
/// leaves the field out at 25, so those memories keep their keys).
pub const FORMER_EXTRACTION_MAX_ENTITIES: usize = 25;

/// Navigation and answering (QRMeM section 2.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NavigateConfig {
    /// `kn`, `ges` or `te`.
    pub method: NavMethod,
    /// Context window L in tokens, instructions and reply included (the paper: 4096).
    pub context_window: usize,
    /// Tokens reserved for the reply inside the window.
    pub reply_tokens: usize,
    /// QRMeM-KN: navigation trials (expansions that change the segments shown) before KN
    /// answers from its final context (`answer.final_context`; default 4).
    pub max_trials: usize,
    /// QRMeM-GES: edge similarity an adjacent node must pass to join the expansion.
    pub ges_threshold: f32,
    /// QRMeM-GES: expansion rounds at most.
    pub ges_max_iterations: usize,
    /// Ablation: score edges with the question only. Set by the method's name
    /// (`kn-no-reflection`), never read from a file or the environment, so a key that the
    /// navigator would overwrite is refused as unknown instead of accepted and ignored.
    #[serde(skip)]
    pub reflection: bool,
    /// Ablation: answer from S_imp only (`kn-no-navigation`); not a key, like `reflection`.
    #[serde(skip)]
    pub navigation: bool,
    /// KN and TE: the share of the window's segment room that the ranked start set S_imp may
    /// take, so that navigation has room to add segments (default 0.5).
    pub start_share: f32,
    /// The weights with which segment ranking (S_imp, KN's final context, GES's retrieval)
    /// fuses its signals by reciprocal rank: BM25, the embedder, the E_s entities' rarity.
    pub rank_weights: [f64; 3],
    /// KN's answerability check stops navigation when the probability the model gives the
    /// "answerable" action (-2), read from the action token's log probabilities, is at least
    /// this (0: the sampled action decides, as in the paper; also when the server returns no
    /// log probabilities).
    pub check_threshold: f64,
    /// KN and TE: order the start set for the second hop (`navigate::bridge`): the best
    /// segment, then every segment by how many bridge entities it names (the entities of the
    /// best segment's paragraphs that name E_s); KN's final context likewise (false: the
    /// paper's start, ranked S_imp only). Left out of the written configuration when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub start_bridge: bool,
    /// KN and TE: order the start set by the hop from its best unit (`navigate::bridge`): the
    /// best unit, then the own passages (the passages titled with their names) of the
    /// entities it names, at most two, then the start set by rank; KN's final context and
    /// GES's ranking likewise (false: the paper's start). Left out of the written
    /// configuration when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub start_hop: bool,
    /// With `start_hop`: the hop starts from the own passages of E_s (the units titled with
    /// an E_s entity's name, at most two, by the question's BM25) instead of the best unit,
    /// and follows the names of the first (false: from the best unit). Left out of the
    /// written configuration when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub start_own: bool,
    /// Navigate and answer over the document's own passages (`text::passages`, each at most
    /// this many tokens) instead of the memory's segments: the graph's passage view
    /// (`Memory::passage_view`), built without an LLM call (0: segments, the paper).
    pub passage_tokens: usize,
    /// Every prompt shows at most this many tokens of segments or passages (0: as many as the
    /// window holds, the paper): the context budget of the passage-grain rows.
    pub context_tokens: usize,
}

impl Default for NavigateConfig {
    fn default() -> Self {
        NavigateConfig {
            method: NavMethod::Kn,
            context_window: 4096,
            reply_tokens: 512,
            max_trials: 4,
            ges_threshold: 0.5,
            ges_max_iterations: 3,
            reflection: true,
            navigation: true,
            start_share: 0.5,
            rank_weights: [2.0, 0.0, 1.0],
            check_threshold: 0.0,
            start_bridge: false,
            start_hop: false,
            start_own: false,
            passage_tokens: 0,
            context_tokens: 0,
        }
    }
}

/// The final answer step of the navigators (`[answer]`, issue 66 item 5): which of the units
/// the last prompt shows, how many, in which order, and what stands above them. A method name's
/// modifiers (`-final-s-mix`, `-final-filled`, `-answer-topN`, `-sentencesN`, `-relevance-order`, `-path`) set
/// the same fields for that method; the baselines' answer context is their name's
/// (`bm25-passages400`). The unit and the budget of every prompt are `[navigate]`'s
/// `passage_tokens` and `context_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnswerConfig {
    /// KN, when its trials are spent without an answer: `ranked` (the best, for the question,
    /// of all of S_imp and every segment the expansions brought), `s-mix` (the last S_mix) or
    /// `s-mix-filled` (the last S_mix, then the start's order and the question's BM25 to the
    /// budget).
    pub final_context: FinalContext,
    /// The order of the units in the final answer prompt: `document` (the paper) or
    /// `relevance` (the start set by rank, then the added units by score).
    pub order: Order,
    /// At most this many units, the best first (0: as many as the window holds). The small
    /// models answer worse from more text (bm25-top5 against bm25-top3), so a method can be
    /// compared at a baseline's size.
    pub max_units: usize,
    /// Sentences instead of whole units, at most this many tokens of them (0: whole units, the
    /// paper): the sentences of the final units that name the question's or the path's
    /// entities or match the question, each with its window (the sentences before and after
    /// it in its passage), under their passages' titles, in document order.
    pub sentence_tokens: usize,
    /// KN: the relations the trials followed from the question's entities (head, description,
    /// tail; issue 66 item 4) above the units. False: the units only, as the paper.
    pub path: bool,
}

impl Default for AnswerConfig {
    fn default() -> Self {
        AnswerConfig {
            final_context: FinalContext::Ranked,
            order: Order::Document,
            max_units: 0,
            sentence_tokens: 0,
            path: false,
        }
    }
}

/// Keys that moved from `[navigate]` to `[answer]`: a file or variable naming the old key is
/// refused with the new one.
const MOVED_TO_ANSWER: [(&str, &str); 5] = [
    ("answer_order", "order"),
    ("final_context", "final_context"),
    ("answer_segments", "max_units"),
    ("answer_sentence_tokens", "sentence_tokens"),
    ("answer_path", "path"),
];

/// The settings the command line's global flags override (`--llm-base-url`, `--llm-model`,
/// `--concurrency`, `--timeout`, `--no-cache`, `--cache-dir`): flags win over file and
/// environment.
#[derive(Clone, Debug, Default)]
pub struct FlagOverrides {
    pub base_urls: Vec<String>,
    pub model: Option<String>,
    pub concurrency: Option<usize>,
    pub timeout_secs: Option<f64>,
    pub no_cache: bool,
    pub cache_dir: Option<PathBuf>,
}

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub llm: LlmConfig,
    pub cache: CacheConfig,
    pub embed: EmbedConfig,
    pub memory: MemoryConfig,
    pub navigate: NavigateConfig,
    pub answer: AnswerConfig,
    /// From `QRMEM_LLM_API_KEY` only.
    #[serde(skip)]
    pub api_key: Secret,
}

/// `~/.cache/qrmem`, or `$QRMEM_CACHE` when set: where the setup scripts install the local
/// server, models and libtorch, and where the reply cache lives by default.
pub fn qrmem_home() -> PathBuf {
    if let Some(dir) = std::env::var_os("QRMEM_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("qrmem")
}

/// Where the configuration came from, for `doctor` and error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    Defaults,
    File(PathBuf),
    /// Values a command's own flags set on top of the loaded configuration.
    Flags,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Defaults => f.write_str("built-in defaults (no qrmem.toml)"),
            ConfigSource::File(p) => write!(f, "{}", p.display()),
            ConfigSource::Flags => f.write_str("from the command-line flags"),
        }
    }
}

impl Config {
    /// Loads the configuration: `path` if given (it must exist), else `$QRMEM_CONFIG`, else
    /// `./qrmem.toml` if present, else the defaults; then applies the environment `env`.
    pub fn load<I>(path: Option<&Path>, env: I) -> Result<(Config, ConfigSource), ConfigError>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let chosen: Option<PathBuf> = match path {
            Some(p) => Some(p.to_path_buf()),
            None => match lookup(CONFIG_ENV).filter(|v| !v.is_empty()) {
                Some(p) => Some(PathBuf::from(p)),
                None => {
                    let local = PathBuf::from(DEFAULT_CONFIG_FILE);
                    local.is_file().then_some(local)
                }
            },
        };
        let (text, source) = match chosen {
            Some(p) => {
                let text = std::fs::read_to_string(&p).map_err(|e| ConfigError::Read {
                    path: p.clone(),
                    source: e,
                })?;
                (text, ConfigSource::File(p))
            }
            None => (String::new(), ConfigSource::Defaults),
        };
        let config = Config::from_toml_and_env(&text, &source, &env)?;
        Ok((config, source))
    }

    /// Parses `text` over the defaults and applies `QRMEM_<SECTION>_<KEY>` overrides from `env`.
    pub fn from_toml_and_env(
        text: &str,
        source: &ConfigSource,
        env: &[(String, String)],
    ) -> Result<Config, ConfigError> {
        let mut file: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Parse {
                    source_name: source.to_string(),
                    message: e.to_string(),
                })?;
        if let Some(llm) = file.get("llm").and_then(|v| v.as_table()) {
            if llm.contains_key("api_key") {
                return Err(ConfigError::KeyInFile {
                    source_name: source.to_string(),
                });
            }
        }
        if let Some(nav) = file.get("navigate").and_then(|v| v.as_table()) {
            if let Some((old, new)) = MOVED_TO_ANSWER.iter().find(|(k, _)| nav.contains_key(*k)) {
                return Err(ConfigError::Invalid {
                    source_name: source.to_string(),
                    key: format!("navigate.{old}"),
                    message: format!("moved to the [answer] section as `{new}`"),
                });
            }
        }
        for (var, _) in env {
            if let Some((old, new)) = MOVED_TO_ANSWER
                .iter()
                .find(|(k, _)| *var == format!("QRMEM_NAVIGATE_{}", k.to_uppercase()))
            {
                return Err(ConfigError::Invalid {
                    source_name: "environment".into(),
                    key: var.clone(),
                    message: format!(
                        "navigate.{old} moved to the [answer] section: QRMEM_ANSWER_{}",
                        new.to_uppercase()
                    ),
                });
            }
        }
        let defaults =
            toml::Table::try_from(Config::default()).map_err(|e| ConfigError::Parse {
                source_name: "built-in defaults".into(),
                message: e.to_string(),
            })?;
        // Environment overrides are applied to the merged table, so they reach every key the
        // defaults know of, with the key's own type.
        for (section, keys) in &defaults {
            let Some(keys) = keys.as_table() else {
                continue;
            };
            for (key, default_value) in keys {
                let var = format!("QRMEM_{}_{}", section.to_uppercase(), key.to_uppercase());
                let Some((_, raw)) = env.iter().find(|(k, _)| *k == var) else {
                    continue;
                };
                let value = env_value(&var, raw, default_value)?;
                let table = file
                    .entry(section.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                match table.as_table_mut() {
                    Some(t) => {
                        t.insert(key.clone(), value);
                    }
                    None => {
                        return Err(ConfigError::Parse {
                            source_name: source.to_string(),
                            message: format!("[{section}] must be a table"),
                        })
                    }
                }
            }
        }
        // A variable of a section's form that names no key is refused, like an unknown key in
        // a file: a typo (or a key that is no setting) never falls back to the default silently.
        let known: Vec<String> = defaults
            .iter()
            .filter_map(|(section, keys)| Some((section, keys.as_table()?)))
            .flat_map(|(section, keys)| {
                keys.keys().map(move |key| {
                    format!("QRMEM_{}_{}", section.to_uppercase(), key.to_uppercase())
                })
            })
            .chain(["QRMEM_LLM_BASE_URL".to_string(), API_KEY_ENV.to_string()])
            .collect();
        for (var, _) in env {
            let sectioned = defaults
                .keys()
                .any(|section| var.starts_with(&format!("QRMEM_{}_", section.to_uppercase())));
            if sectioned && !known.contains(var) {
                return Err(ConfigError::Invalid {
                    source_name: "environment".into(),
                    key: var.clone(),
                    message: "no such setting (see `qrmem config` for the keys; the ablations and the passage grain are method names, such as kn-no-reflection or kn-passages400)".into(),
                });
            }
        }
        // Short names the guide and README use: QRMEM_LLM_BASE_URL (one URL or a comma list;
        // QRMEM_LLM_BASE_URLS wins when both are set), QRMEM_CACHE_DIR, QRMEM_NO_CACHE.
        let has = |name: &str| env.iter().any(|(k, _)| k == name);
        for (var, section, key) in [
            ("QRMEM_LLM_BASE_URL", "llm", "base_urls"),
            ("QRMEM_NO_CACHE", "cache", "enabled"),
        ] {
            if var == "QRMEM_LLM_BASE_URL" && has("QRMEM_LLM_BASE_URLS") {
                continue;
            }
            let Some((_, raw)) = env.iter().find(|(k, _)| k == var) else {
                continue;
            };
            let value = match key {
                "enabled" => toml::Value::Boolean(!truthy(raw)),
                _ => env_value(var, raw, &toml::Value::Array(Vec::new()))?,
            };
            if let Some(t) = file
                .entry(section.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
            {
                t.insert(key.to_string(), value);
            }
        }
        // The typed words, checked here so that an unknown one names its key.
        for (section, key, parse) in vocabulary::TYPED_KEYS {
            let value = file
                .get(section)
                .and_then(|s| s.as_table())
                .and_then(|s| s.get(key));
            if let Some(why) = value.and_then(|v| v.as_str()).and_then(|v| parse(v).err()) {
                return Err(ConfigError::Invalid {
                    source_name: source.to_string(),
                    key: format!("{section}.{key}"),
                    message: why,
                });
            }
        }
        let mut config: Config =
            toml::Value::Table(file)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Parse {
                    source_name: source.to_string(),
                    message: e.to_string(),
                })?;
        if let Some((_, dir)) = env.iter().find(|(k, _)| k == "LIBTORCH") {
            if !env.iter().any(|(k, _)| k == "QRMEM_EMBED_LIBTORCH_DIR") && !dir.is_empty() {
                config.embed.libtorch_dir = PathBuf::from(dir);
            }
        }
        config.api_key = Secret::new(
            env.iter()
                .find(|(k, _)| k == API_KEY_ENV)
                .map(|(_, v)| v.clone()),
        );
        config.validate(source)?;
        Ok(config)
    }

    /// This configuration with the global flags applied, checked again (`source` names where
    /// the rest came from).
    pub fn with_flags(
        mut self,
        flags: &FlagOverrides,
        source: &ConfigSource,
    ) -> Result<Config, ConfigError> {
        if !flags.base_urls.is_empty() {
            self.llm.base_urls = flags.base_urls.clone();
        }
        if let Some(m) = &flags.model {
            self.llm.model = m.clone();
        }
        if let Some(n) = flags.concurrency {
            self.llm.concurrency = n;
        }
        if let Some(t) = flags.timeout_secs {
            self.llm.timeout_secs = t;
        }
        if flags.no_cache {
            self.cache.enabled = false;
        }
        if let Some(d) = &flags.cache_dir {
            self.cache.dir = d.clone();
        }
        self.validate(source)?;
        Ok(self)
    }

    /// Checks values that parse but make no sense.
    pub fn validate(&self, source: &ConfigSource) -> Result<(), ConfigError> {
        let bad = |key: &str, why: String| ConfigError::Invalid {
            source_name: source.to_string(),
            key: key.to_string(),
            message: why,
        };
        if self.llm.base_urls.is_empty() {
            return Err(bad("llm.base_urls", "needs at least one URL".into()));
        }
        for url in &self.llm.base_urls {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(bad(
                    "llm.base_urls",
                    format!("'{url}' is not an http(s) URL"),
                ));
            }
        }
        if self.llm.model.trim().is_empty() {
            return Err(bad("llm.model", "is empty".into()));
        }
        if self.llm.timeout_secs.is_nan() || self.llm.timeout_secs <= 0.0 {
            return Err(bad("llm.timeout_secs", "must be positive".into()));
        }
        if self.llm.concurrency == 0 {
            return Err(bad("llm.concurrency", "must be at least 1".into()));
        }
        if self.llm.max_tokens == 0 {
            return Err(bad("llm.max_tokens", "must be at least 1".into()));
        }
        if self.memory.segment_tokens < 16 {
            return Err(bad("memory.segment_tokens", "must be at least 16".into()));
        }
        if !(0.0..=1.0).contains(&self.memory.question_rouge_threshold) {
            return Err(bad(
                "memory.question_rouge_threshold",
                "must lie in [0, 1]".into(),
            ));
        }
        if self.memory.extraction_max_tokens < 64 {
            return Err(bad(
                "memory.extraction_max_tokens",
                "must be at least 64 (the joint extraction reply is a JSON object of lists)".into(),
            ));
        }
        if !(1..=100).contains(&self.memory.extraction_max_entities) {
            return Err(bad(
                "memory.extraction_max_entities",
                "must lie in [1, 100] (the extraction reply's entity list)".into(),
            ));
        }
        if !(-2.0..=2.0).contains(&self.memory.extraction_frequency_penalty) {
            return Err(bad(
                "memory.extraction_frequency_penalty",
                "must lie in [-2, 2] (the OpenAI range)".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.memory.entity_similarity) {
            return Err(bad("memory.entity_similarity", "must lie in [0, 1]".into()));
        }
        if self.navigate.reply_tokens >= self.navigate.context_window {
            return Err(bad(
                "navigate.reply_tokens",
                "must be smaller than navigate.context_window".into(),
            ));
        }
        if !(self.navigate.start_share > 0.0 && self.navigate.start_share <= 1.0) {
            return Err(bad(
                "navigate.start_share",
                format!(
                    "{} must lie in (0, 1]: the share of the window's segment room the start set may take",
                    self.navigate.start_share
                ),
            ));
        }
        let w = self.navigate.rank_weights;
        if w.iter().any(|x| !x.is_finite() || *x < 0.0) || w.iter().all(|x| *x == 0.0) {
            return Err(bad(
                "navigate.rank_weights",
                format!(
                    "{w:?}: the weights of BM25, the embedder and the entity rarity must be finite, at least 0, and not all 0"
                ),
            ));
        }
        let t = self.navigate.check_threshold;
        if !(0.0..=1.0).contains(&t) {
            return Err(bad(
                "navigate.check_threshold",
                format!("{t} must lie in [0, 1]: a probability (0 turns the threshold off)"),
            ));
        }
        Ok(())
    }

    /// The configuration as TOML (the API key is never part of it).
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string_pretty(self).map_err(|e| ConfigError::Parse {
            source_name: "configuration".into(),
            message: e.to_string(),
        })
    }
}

fn truthy(raw: &str) -> bool {
    matches!(
        raw.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// Converts an environment string to the TOML type of the key's default.
fn env_value(var: &str, raw: &str, like: &toml::Value) -> Result<toml::Value, ConfigError> {
    let invalid = |what: &str| ConfigError::Env {
        var: var.to_string(),
        value: raw.to_string(),
        expected: what.to_string(),
    };
    let raw_t = raw.trim();
    Ok(match like {
        toml::Value::String(_) => toml::Value::String(raw.to_string()),
        toml::Value::Integer(_) => {
            toml::Value::Integer(raw_t.parse().map_err(|_| invalid("an integer"))?)
        }
        toml::Value::Float(_) => {
            toml::Value::Float(raw_t.parse().map_err(|_| invalid("a number"))?)
        }
        toml::Value::Boolean(_) => match raw_t.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => toml::Value::Boolean(true),
            "0" | "false" | "no" | "off" => toml::Value::Boolean(false),
            _ => return Err(invalid("true or false")),
        },
        toml::Value::Array(_) => toml::Value::Array(
            raw.split(',')
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(|s| toml::Value::String(s.to_string()))
                .collect(),
        ),
        _ => return Err(invalid("a value of the key's type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_match_the_paper() {
        let c = Config::from_toml_and_env("", &ConfigSource::Defaults, &[]).unwrap();
        assert_eq!(c.memory.segment_tokens, 600);
        assert_eq!(c.memory.question_rouge_threshold, 0.6);
        assert_eq!(c.navigate.context_window, 4096);
        assert_eq!(c.navigate.max_trials, 4);
        assert_eq!(c.llm.json_retries, 4);
        assert_eq!(c.llm.retry_temperature, 0.7);
        assert_eq!(c.llm.temperature, 0.0);
        assert_eq!(c.llm.base_urls, vec!["http://127.0.0.1:8080/v1"]);
    }

    #[test]
    fn file_then_env_override() {
        let text = "[llm]\nmodel = \"from-file\"\nconcurrency = 2\n[navigate]\nmax_trials = 6\n";
        let e = env(&[
            ("QRMEM_LLM_MODEL", "from-env"),
            ("QRMEM_LLM_BASE_URL", "http://ignored:9/v1"),
            ("QRMEM_LLM_BASE_URLS", "http://a:1/v1, http://b:2/v1"),
            ("QRMEM_LLM_TIMEOUT_SECS", "7.5"),
            ("QRMEM_NO_CACHE", "1"),
        ]);
        let c = Config::from_toml_and_env(text, &ConfigSource::Defaults, &e).unwrap();
        assert_eq!(c.llm.model, "from-env");
        assert_eq!(c.llm.concurrency, 2);
        assert_eq!(c.navigate.max_trials, 6);
        assert_eq!(c.llm.base_urls, vec!["http://a:1/v1", "http://b:2/v1"]);
        assert_eq!(c.llm.timeout_secs, 7.5);
        assert!(!c.cache.enabled);
        let c = Config::from_toml_and_env(
            "",
            &ConfigSource::Defaults,
            &env(&[
                ("QRMEM_LLM_BASE_URL", "http://one:3/v1"),
                ("QRMEM_CACHE_DIR", "/tmp/x"),
            ]),
        )
        .unwrap();
        assert_eq!(c.llm.base_urls, vec!["http://one:3/v1"]);
        assert_eq!(c.cache.dir, PathBuf::from("/tmp/x"));
        let c = Config::from_toml_and_env(
            "",
            &ConfigSource::Defaults,
            &env(&[
                ("QRMEM_MEMORY_EXTRACTION_CUT_REPEATS", "1"),
                ("QRMEM_MEMORY_EXTRACTION_FORMAT", "compact"),
            ]),
        )
        .unwrap();
        assert_eq!(c.memory.extraction_cut_repeats, 1);
        assert_eq!(c.memory.extraction_format, ExtractionFormat::Compact);
    }

    #[test]
    fn the_answer_section_reads_from_file_and_env_and_old_keys_name_the_new_ones() {
        let c = Config::from_toml_and_env(
            "[answer]\nsentence_tokens = 400\nfinal_context = \"s-mix\"\n",
            &ConfigSource::Defaults,
            &env(&[
                ("QRMEM_ANSWER_PATH", "true"),
                ("QRMEM_ANSWER_MAX_UNITS", "3"),
            ]),
        )
        .unwrap();
        assert_eq!(
            c.answer,
            AnswerConfig {
                final_context: FinalContext::SMix,
                order: Order::Document,
                max_units: 3,
                sentence_tokens: 400,
                path: true,
            }
        );
        let err = Config::from_toml_and_env(
            "",
            &ConfigSource::Defaults,
            &env(&[("QRMEM_NAVIGATE_ANSWER_ORDER", "relevance")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("QRMEM_NAVIGATE_ANSWER_ORDER") && err.contains("QRMEM_ANSWER_ORDER"),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_is_a_clear_error() {
        let err = Config::from_toml_and_env(
            "[llm]\nmodle = \"x\"\n",
            &ConfigSource::File("q.toml".into()),
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("q.toml") && err.contains("modle"), "{err}");
    }

    #[test]
    fn keys_the_method_name_sets_are_refused_not_ignored() {
        // The ablations are method names (kn-no-reflection, kn-no-navigation): a key the
        // navigator would overwrite is an error naming the file and the key.
        for key in ["reflection", "navigation"] {
            let err = Config::from_toml_and_env(
                &format!("[navigate]\n{key} = false\n"),
                &ConfigSource::File("q.toml".into()),
                &[],
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("q.toml") && err.contains(key), "{err}");
            let var = format!("QRMEM_NAVIGATE_{}", key.to_uppercase());
            let err = Config::from_toml_and_env(
                "",
                &ConfigSource::Defaults,
                &env(&[(var.as_str(), "false")]),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(&var), "{err}");
        }
        let c = Config::default();
        assert!(c.navigate.reflection && c.navigate.navigation);
    }

    #[test]
    fn bad_env_value_names_the_variable() {
        let err = Config::from_toml_and_env(
            "",
            &ConfigSource::Defaults,
            &env(&[("QRMEM_LLM_CONCURRENCY", "many")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("QRMEM_LLM_CONCURRENCY") && err.contains("many"),
            "{err}"
        );
    }

    #[test]
    fn api_key_only_from_env_and_never_printed() {
        let err = Config::from_toml_and_env(
            "[llm]\napi_key = \"sk-file\"\n",
            &ConfigSource::Defaults,
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("QRMEM_LLM_API_KEY"), "{err}");
        assert!(!err.contains("sk-file"));
        let c = Config::from_toml_and_env(
            "",
            &ConfigSource::Defaults,
            &env(&[(API_KEY_ENV, "sk-secret-123")]),
        )
        .unwrap();
        assert_eq!(c.api_key.expose(), Some("sk-secret-123"));
        assert!(!format!("{c:?}").contains("sk-secret-123"));
        assert!(!c.to_toml().unwrap().contains("sk-secret-123"));
    }

    #[test]
    fn invalid_values_are_rejected() {
        // Each error names the file and the key, and says what is wrong.
        let file = ConfigSource::File(PathBuf::from("/etc/qrmem-test.toml"));
        for (text, key, why) in [
            (
                "[llm]\nbase_urls = []\n",
                "llm.base_urls",
                "at least one URL",
            ),
            (
                "[llm]\nbase_urls = [\"localhost:8080\"]\n",
                "llm.base_urls",
                "'localhost:8080' is not an http(s) URL",
            ),
            ("[llm]\nconcurrency = 0\n", "llm.concurrency", "at least 1"),
            ("[navigate]\nmethod = \"bfs\"\n", "navigate.method", "bfs"),
            (
                "[navigate]\nreply_tokens = 5000\n",
                "navigate.reply_tokens",
                "",
            ),
            (
                "[navigate]\nstart_share = 0.0\n",
                "navigate.start_share",
                "must lie in (0, 1]",
            ),
            (
                "[answer]\norder = \"random\"\n",
                "answer.order",
                "unknown segment order 'random' (document or relevance)",
            ),
            (
                "[navigate]\nrank_weights = [0.0, 0.0, 0.0]\n",
                "navigate.rank_weights",
                "not all 0",
            ),
            (
                "[navigate]\nrank_weights = [1.0, -1.0, 0.0]\n",
                "navigate.rank_weights",
                "at least 0",
            ),
            (
                "[answer]\nfinal_context = \"all\"\n",
                "answer.final_context",
                "unknown final context 'all' (ranked, s-mix or s-mix-filled)",
            ),
            (
                "[memory]\nextraction_format = \"short\"\n",
                "memory.extraction_format",
                "unknown extraction format 'short' (paper or compact)",
            ),
            (
                "[memory]\nextraction_max_entities = 0\n",
                "memory.extraction_max_entities",
                "must lie in [1, 100]",
            ),
            (
                "[navigate]\nanswer_segments = 3\n",
                "navigate.answer_segments",
                "moved to the [answer] section as `max_units`",
            ),
        ] {
            let err = Config::from_toml_and_env(text, &file, &[])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("/etc/qrmem-test.toml") && err.contains(key) && err.contains(why),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn missing_explicit_file_is_an_error() {
        let err = Config::load(Some(Path::new("/nonexistent/qrmem.toml")), Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/qrmem.toml"), "{err}");
    }
}
