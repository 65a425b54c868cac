//! A BERT encoder with mean pooling over the attention mask, on libtorch (tch + rust-bert),
//! loading a Hugging Face style model directory: `config.json`, `vocab.txt` or a WordPiece
//! `tokenizer.json`, `model.safetensors`. Contriever (raw dot products) and sentence-transformers
//! models such as all-MiniLM-L6-v2 (normalised) load alike.

use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rust_bert::bert::{BertConfig, BertEmbeddings, BertModel};
use rust_tokenizers::tokenizer::{BertTokenizer, Tokenizer, TruncationStrategy};
use rust_tokenizers::vocab::Vocab;
use tch::{nn, Device, Kind, Tensor};

use super::{EmbedError, Embedder};

struct Model {
    _vs: nn::VarStore,
    bert: BertModel<BertEmbeddings>,
}

/// The libtorch BERT embedder. Forward passes are serialised (one model, one lock); libtorch
/// parallelises inside each batch over `threads`.
pub struct BertEmbedder {
    id: String,
    model: Mutex<Model>,
    tokenizer: BertTokenizer,
    pad_id: i64,
    max_len: usize,
    normalize: bool,
    dim: usize,
    batch_size: usize,
    device: Device,
    _vocab_dir: Option<tempfile::TempDir>,
}

fn model_err(dir: &Path, message: impl Into<String>) -> EmbedError {
    EmbedError::Model {
        dir: dir.to_path_buf(),
        message: message.into(),
    }
}

fn read_json(dir: &Path, file: &str) -> Result<Option<serde_json::Value>, EmbedError> {
    let path = dir.join(file);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| model_err(dir, format!("cannot read {file}: {e}")))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| model_err(dir, format!("{file} is not valid JSON: {e}")))
}

/// Tensor names in a safetensors file (from its header only).
fn safetensors_names(dir: &Path) -> Result<Vec<String>, EmbedError> {
    let path = dir.join("model.safetensors");
    let mut f = std::fs::File::open(&path)
        .map_err(|e| model_err(dir, format!("cannot open model.safetensors: {e}")))?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len)
        .map_err(|_| model_err(dir, "model.safetensors is truncated (no header)"))?;
    let n = u64::from_le_bytes(len);
    if n == 0 || n > 100_000_000 {
        return Err(model_err(
            dir,
            "model.safetensors has an invalid header length",
        ));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header)
        .map_err(|_| model_err(dir, "model.safetensors is truncated (header)"))?;
    let v: serde_json::Value = serde_json::from_slice(&header).map_err(|e| {
        model_err(
            dir,
            format!("model.safetensors has a malformed header: {e}"),
        )
    })?;
    Ok(v.as_object()
        .map(|o| o.keys().filter(|k| *k != "__metadata__").cloned().collect())
        .unwrap_or_default())
}

impl BertEmbedder {
    /// Loads the model in `dir`. `normalize`: None decides from the directory (a
    /// sentence-transformers `modules.json` with a Normalize module), Some forces it.
    pub fn load(
        dir: &Path,
        normalize: Option<bool>,
        batch_size: usize,
        threads: usize,
    ) -> Result<Self, EmbedError> {
        if !dir.is_dir() {
            return Err(model_err(
                dir,
                "does not exist (run scripts/setup-embedder.sh or set QRMEM_EMBED_MODEL_DIR)",
            ));
        }
        let missing = missing_model_files(dir);
        if !missing.is_empty() {
            return Err(model_err(dir, format!("lacks {}", missing.join(", "))));
        }
        let config_text = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| model_err(dir, format!("cannot read config.json: {e}")))?;
        let config: BertConfig = serde_json::from_str(&config_text)
            .map_err(|e| model_err(dir, format!("config.json is not a BERT configuration: {e}")))?;

        let tok_cfg = read_json(dir, "tokenizer_config.json")?;
        let lower = tok_cfg
            .as_ref()
            .and_then(|c| c.get("do_lower_case"))
            .and_then(|v| v.as_bool())
            .unwrap_or(true);
        let strip_accents = tok_cfg
            .as_ref()
            .and_then(|c| c.get("strip_accents"))
            .and_then(|v| v.as_bool())
            .unwrap_or(lower);
        let (vocab_path, vocab_dir) = vocab_file(dir)?;
        let tokenizer = BertTokenizer::from_file(&vocab_path, lower, strip_accents)
            .map_err(|e| model_err(dir, format!("cannot load the vocabulary: {e}")))?;
        let pad_id = tokenizer.vocab().token_to_id("[PAD]");

        let st = read_json(dir, "sentence_bert_config.json")?;
        let max_len = st
            .as_ref()
            .and_then(|c| c.get("max_seq_length"))
            .and_then(|v| v.as_u64())
            .map(|n| n as usize)
            .unwrap_or(512)
            .min(config.max_position_embeddings.max(2) as usize);
        let normalize = match normalize {
            Some(n) => n,
            None => read_json(dir, "modules.json")?
                .map(|m| m.to_string().contains("Normalize"))
                .unwrap_or(false),
        };

        if threads > 0 {
            tch::set_num_threads(threads as i32);
        }
        let device = Device::cuda_if_available();
        let names = safetensors_names(dir)?;
        let prefixed = names.iter().any(|n| n.starts_with("bert."));
        let weights = dir.join("model.safetensors");
        let loaded = catch_unwind(AssertUnwindSafe(|| -> Result<Model, String> {
            let mut vs = nn::VarStore::new(device);
            let root = vs.root();
            let path = if prefixed { root / "bert" } else { root };
            let bert = BertModel::<BertEmbeddings>::new_with_optional_pooler(&path, &config, false);
            vs.load(&weights).map_err(|e| e.to_string())?;
            Ok(Model { _vs: vs, bert })
        }))
        .map_err(|_| model_err(dir, "libtorch failed while building the model"))?
        .map_err(|e| {
            model_err(
                dir,
                format!("model.safetensors does not fit config.json: {e}"),
            )
        })?;

        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        Ok(BertEmbedder {
            id: format!(
                "bert:{name}:{}:max{max_len}",
                if normalize { "normalized" } else { "raw" }
            ),
            model: Mutex::new(loaded),
            tokenizer,
            pad_id,
            max_len,
            normalize,
            dim: config.hidden_size as usize,
            batch_size: batch_size.max(1),
            device,
            _vocab_dir: vocab_dir,
        })
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encoded =
            self.tokenizer
                .encode_list(texts, self.max_len, &TruncationStrategy::LongestFirst, 0);
        let width = encoded
            .iter()
            .map(|e| e.token_ids.len())
            .max()
            .unwrap_or(0)
            .max(1);
        let rows = encoded.len();
        let mut ids = Vec::with_capacity(rows * width);
        let mut mask = Vec::with_capacity(rows * width);
        for e in &encoded {
            ids.extend_from_slice(&e.token_ids);
            mask.extend(std::iter::repeat_n(1i64, e.token_ids.len()));
            let pad = width - e.token_ids.len();
            ids.extend(std::iter::repeat_n(self.pad_id, pad));
            mask.extend(std::iter::repeat_n(0i64, pad));
        }
        let model = self
            .model
            .lock()
            .map_err(|_| EmbedError::Run("model lock poisoned".into()))?;
        let out = catch_unwind(AssertUnwindSafe(|| -> Result<Vec<f32>, String> {
            tch::no_grad(|| {
                let shape = [rows as i64, width as i64];
                let ids = Tensor::from_slice(&ids).view(shape).to(self.device);
                let mask = Tensor::from_slice(&mask).view(shape).to(self.device);
                let types = ids.zeros_like();
                let hidden = model
                    .bert
                    .forward_t(
                        Some(&ids),
                        Some(&mask),
                        Some(&types),
                        None,
                        None,
                        None,
                        None,
                        false,
                    )
                    .map_err(|e| e.to_string())?
                    .hidden_state;
                let m = mask.unsqueeze(-1).to_kind(Kind::Float);
                let summed = (hidden * &m).sum_dim_intlist([1i64].as_slice(), false, Kind::Float);
                let counts = m
                    .sum_dim_intlist([1i64].as_slice(), false, Kind::Float)
                    .clamp_min(1e-9);
                let mut pooled = summed / counts;
                if self.normalize {
                    let norm = pooled
                        .norm_scalaropt_dim(2, [1i64].as_slice(), true)
                        .clamp_min(1e-12);
                    pooled /= norm;
                }
                let flat = pooled.to(Device::Cpu).to_kind(Kind::Float).flatten(0, -1);
                Vec::<f32>::try_from(&flat).map_err(|e| e.to_string())
            })
        }))
        .map_err(|_| EmbedError::Run("libtorch failed during the forward pass".into()))?
        .map_err(EmbedError::Run)?;
        if out.len() != rows * self.dim {
            return Err(EmbedError::Run(format!(
                "expected {} x {} values, got {}",
                rows,
                self.dim,
                out.len()
            )));
        }
        Ok(out.chunks(self.dim).map(<[f32]>::to_vec).collect())
    }
}

/// `vocab.txt`, or one written from a WordPiece `tokenizer.json` into a temporary directory.
fn vocab_file(dir: &Path) -> Result<(PathBuf, Option<tempfile::TempDir>), EmbedError> {
    let vocab = dir.join("vocab.txt");
    if vocab.is_file() {
        return Ok((vocab, None));
    }
    let tj = read_json(dir, "tokenizer.json")?
        .ok_or_else(|| model_err(dir, "lacks tokenizer.json or vocab.txt"))?;
    let model = tj
        .get("model")
        .ok_or_else(|| model_err(dir, "tokenizer.json has no \"model\""))?;
    if model.get("type").and_then(|t| t.as_str()) != Some("WordPiece") {
        return Err(model_err(
            dir,
            "tokenizer.json is not a WordPiece (BERT) tokenizer; provide vocab.txt",
        ));
    }
    let map = model
        .get("vocab")
        .and_then(|v| v.as_object())
        .ok_or_else(|| model_err(dir, "tokenizer.json has no WordPiece vocabulary"))?;
    let mut entries: Vec<(u64, &str)> = map
        .iter()
        .filter_map(|(k, v)| v.as_u64().map(|i| (i, k.as_str())))
        .collect();
    entries.sort();
    let tmp = tempfile::tempdir()
        .map_err(|e| model_err(dir, format!("cannot create a temporary directory: {e}")))?;
    let path = tmp.path().join("vocab.txt");
    let text: String = entries.iter().map(|(_, t)| format!("{t}\n")).collect();
    std::fs::write(&path, text)
        .map_err(|e| model_err(dir, format!("cannot write the vocabulary: {e}")))?;
    Ok((path, Some(tmp)))
}

impl Embedder for BertEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn normalized(&self) -> bool {
        self.normalize
    }

    /// Texts are sorted by length and batched, so padding stays small; results come back in
    /// input order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// Files a Hugging Face style BERT model directory needs.
pub fn missing_model_files(dir: &Path) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !dir.join("config.json").is_file() {
        missing.push("config.json");
    }
    if !dir.join("tokenizer.json").is_file() && !dir.join("vocab.txt").is_file() {
        missing.push("tokenizer.json or vocab.txt");
    }
    if !dir.join("model.safetensors").is_file() {
        missing.push("model.safetensors");
    }
    missing
}
