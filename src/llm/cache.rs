//! Content-addressed on-disk cache of LLM replies.
//!
//! Key: SHA-256 of the canonical JSON of (format version, model, messages, sampling, schema,
//! and the schema as sent when its property order is not the name order).
//! The API key and the server URL are not part of it: the same model answers the same request
//! the same way wherever it is served. One file per entry (`DIR/ab/abcd....json`), written to a
//! temporary file in the same directory, flushed, then renamed into place: a crash mid-write
//! leaves at most a stray temporary file, never a torn entry, and never touches other entries.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{ChatReply, ChatRequest, JsonSchema, Message, Sampling};
use crate::error::LlmError;

/// Bumped when the key material or the entry format changes.
const FORMAT: u32 = 1;

/// A cache key: 64 hex digits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey(String);

impl CacheKey {
    pub fn for_request(model: &str, request: &ChatRequest) -> Self {
        #[derive(Serialize)]
        struct Material<'a> {
            format: u32,
            model: &'a str,
            messages: &'a [Message],
            sampling: &'a Sampling,
            schema: &'a Option<JsonSchema>,
            /// The schema as sent, when its property order is not the name order: a reply
            /// whose keys come in another order is another reply. Absent otherwise, so the
            /// keys of requests sent the same way as before this field are unchanged.
            #[serde(skip_serializing_if = "Option::is_none")]
            sent_order: Option<String>,
        }
        let material = Material {
            format: FORMAT,
            model,
            messages: &request.messages,
            sampling: &request.sampling,
            schema: &request.schema,
            sent_order: request.schema.as_ref().and_then(JsonSchema::sent_order),
        };
        // Serialising plain structs and serde_json's (sorted, string-keyed) maps cannot fail;
        // the Debug fallback keeps the function total and deterministic all the same.
        let bytes = serde_json::to_vec(&material)
            .unwrap_or_else(|_| format!("{FORMAT}|{model}|{request:?}").into_bytes());
        CacheKey(hex::encode(Sha256::digest(&bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Serialize, Deserialize)]
struct Entry {
    format: u32,
    key: String,
    model: String,
    request: ChatRequest,
    reply: ChatReply,
}

/// The reply cache in one directory.
#[derive(Clone, Debug)]
pub struct ReplyCache {
    dir: PathBuf,
}

impl ReplyCache {
    /// Opens (creating if needed) the cache directory.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, LlmError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| LlmError::Cache {
            path: dir.clone(),
            message: format!("cannot create the directory: {e}"),
        })?;
        Ok(ReplyCache { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(&key.0[..2]).join(format!("{}.json", key.0))
    }

    /// The cached reply, if any. An unreadable or foreign entry counts as a miss (and is
    /// replaced by the next `put`); it is logged, never fatal.
    pub fn get(&self, key: &CacheKey) -> Option<ChatReply> {
        let path = self.path(key);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), "unreadable cache entry: {e}");
                return None;
            }
        };
        match serde_json::from_slice::<Entry>(&bytes) {
            Ok(entry) if entry.format == FORMAT && entry.key == key.0 => Some(entry.reply),
            Ok(_) => {
                tracing::warn!(path = %path.display(), "cache entry of another format or key; ignored");
                None
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "corrupt cache entry ignored: {e}");
                None
            }
        }
    }

    /// Stores a reply atomically (temporary file, fsync, rename).
    pub fn put(
        &self,
        key: &CacheKey,
        model: &str,
        request: &ChatRequest,
        reply: &ChatReply,
    ) -> Result<(), LlmError> {
        let path = self.path(key);
        let parent = path.parent().unwrap_or(&self.dir).to_path_buf();
        let err = |what: &str, e: &dyn std::fmt::Display| LlmError::Cache {
            path: path.clone(),
            message: format!("{what}: {e}"),
        };
        fs::create_dir_all(&parent).map_err(|e| err("cannot create the directory", &e))?;
        let mut stored = reply.clone();
        stored.cached = false;
        stored.attempts = 0;
        let entry = Entry {
            format: FORMAT,
            key: key.0.clone(),
            model: model.to_string(),
            request: request.clone(),
            reply: stored,
        };
        let bytes = serde_json::to_vec_pretty(&entry).map_err(|e| err("cannot serialise", &e))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&parent)
            .map_err(|e| err("cannot create a temporary file", &e))?;
        tmp.write_all(&bytes).map_err(|e| err("cannot write", &e))?;
        crate::fsutil::readable_by_all(tmp.as_file());
        tmp.as_file()
            .sync_all()
            .map_err(|e| err("cannot sync", &e))?;
        tmp.persist(&path)
            .map_err(|e| err("cannot rename into place", &e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;

    fn request(text: &str, temperature: f32) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::user(text)],
            sampling: Sampling {
                temperature,
                max_tokens: 64,
                frequency_penalty: 0.5,
                seed: None,
                top_logprobs: 0,
                cut_repeats: 0,
                cut_repeats_in: None,
            },
            schema: None,
        }
    }

    fn reply(text: &str) -> ChatReply {
        ChatReply {
            content: text.into(),
            finish_reason: "stop".into(),
            usage: Usage {
                prompt_tokens: 5,
                completion_tokens: 2,
                ..Usage::default()
            },
            attempts: 2,
            cached: false,
            logprobs: Vec::new(),
        }
    }

    #[test]
    fn key_depends_on_every_input() {
        let base = CacheKey::for_request("m", &request("hi", 0.0));
        assert_eq!(base, CacheKey::for_request("m", &request("hi", 0.0)));
        assert_ne!(base, CacheKey::for_request("m2", &request("hi", 0.0)));
        assert_ne!(base, CacheKey::for_request("m", &request("hi!", 0.0)));
        assert_ne!(base, CacheKey::for_request("m", &request("hi", 0.7)));
        let mut seeded = request("hi", 0.0);
        seeded.sampling.seed = Some(1);
        assert_ne!(base, CacheKey::for_request("m", &seeded));
        let mut with_schema = request("hi", 0.0);
        with_schema.schema = Some(JsonSchema {
            name: "s".into(),
            schema: serde_json::json!({"type": "object"}),
        });
        assert_ne!(base, CacheKey::for_request("m", &with_schema));
        // Another schema (the response format the server is asked for) is another key.
        let mut other_schema = with_schema.clone();
        other_schema.schema.as_mut().unwrap().schema = serde_json::json!({"type": "array"});
        assert_ne!(
            CacheKey::for_request("m", &with_schema),
            CacheKey::for_request("m", &other_schema)
        );
        let mut longer = request("hi", 0.0);
        longer.sampling.max_tokens = 65;
        assert_ne!(base, CacheKey::for_request("m", &longer));
        let mut penalised = request("hi", 0.0);
        penalised.sampling.frequency_penalty = 0.0;
        assert_ne!(base, CacheKey::for_request("m", &penalised));
        // The same text from another role is another conversation.
        let mut system = request("hi", 0.0);
        system.messages = vec![Message::system("hi")];
        assert_ne!(base, CacheKey::for_request("m", &system));
        assert_eq!(base.as_str().len(), 64);
    }

    #[test]
    fn only_a_schema_sent_in_another_order_than_by_name_changes_the_key() {
        // The key as it was before the sent order joined it: (format, model, messages,
        // sampling, schema).
        fn old_key(model: &str, r: &ChatRequest) -> String {
            let text = format!(
                "{{\"format\":{FORMAT},\"model\":{},\"messages\":{},\"sampling\":{},\"schema\":{}}}",
                serde_json::to_string(model).unwrap(),
                serde_json::to_string(&r.messages).unwrap(),
                serde_json::to_string(&r.sampling).unwrap(),
                serde_json::to_string(&r.schema).unwrap()
            );
            hex::encode(Sha256::digest(text.as_bytes()))
        }
        let with = |schema: serde_json::Value| {
            let mut r = request("q", 0.0);
            r.schema = Some(JsonSchema {
                name: "s".into(),
                schema,
            });
            r
        };
        // Required in name order, or no schema: sent as before, keyed as before (old caches
        // stay valid).
        let by_name = with(serde_json::json!({"type": "object", "properties": {
            "reasoning": {"type": "string"}, "verdict": {"type": "integer"}
        }, "required": ["reasoning", "verdict"]}));
        for r in [&by_name, &request("q", 0.0)] {
            assert_eq!(CacheKey::for_request("m", r).as_str(), old_key("m", r));
        }
        // "reasoning" before "answer": sent in another order than by name, so another key.
        let reasoning_first = with(serde_json::json!({"type": "object", "properties": {
            "reasoning": {"type": "string"}, "answer": {"type": "string"}
        }, "required": ["reasoning", "answer"]}));
        assert_ne!(
            CacheKey::for_request("m", &reasoning_first).as_str(),
            old_key("m", &reasoning_first)
        );
    }

    #[test]
    fn round_trip_and_corrupt_entries_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ReplyCache::open(dir.path()).unwrap();
        let req = request("hello", 0.0);
        let key = CacheKey::for_request("m", &req);
        assert!(cache.get(&key).is_none());
        cache.put(&key, "m", &req, &reply("world")).unwrap();
        let got = cache.get(&key).unwrap();
        assert_eq!(got.content, "world");
        assert_eq!(got.usage.prompt_tokens, 5);
        // A second entry, then a torn first entry: the second is untouched, the first a miss.
        let req2 = request("other", 0.0);
        let key2 = CacheKey::for_request("m", &req2);
        cache.put(&key2, "m", &req2, &reply("two")).unwrap();
        let path = cache.path(&key);
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(cache.get(&key).is_none());
        assert_eq!(cache.get(&key2).unwrap().content, "two");
        // The next put repairs it.
        cache.put(&key, "m", &req, &reply("again")).unwrap();
        assert_eq!(cache.get(&key).unwrap().content, "again");
        // No temporary files are left behind.
        let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_string_lossy().ends_with(".json"))
            .collect();
        assert!(leftovers.is_empty());
    }
}
