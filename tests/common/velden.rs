//! The sample document (data/sample/velden.txt) built into a memory with a scripted LLM whose
//! replies depend on the prompt kind and the segment, like a well-behaved model's would.

use std::sync::Arc;

use qrmem::config::Config;
use qrmem::llm::{ChatRequest, Policy, Scripted, ScriptedLlm, Service};
use qrmem::memory::{BuildParams, Builder, Memory};
use qrmem::prompts::Prompts;

pub const DOC: &str = include_str!("../../data/sample/velden.txt");
pub const QUESTION: &str = "In which city was the designer of the Velden Bridge born?";

/// The last message of a request: the prompt (a conversation's real turn).
pub fn prompt_of(r: &ChatRequest) -> &str {
    &r.messages.last().unwrap().content
}

/// Every message of a request, joined: what tells a conversation's task (its system turn).
pub fn conversation_of(r: &ChatRequest) -> String {
    r.messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Replies by prompt kind and segment, like a well-behaved model would.
pub fn reply(r: &ChatRequest, broken_entities_in_segment_1: bool) -> Scripted {
    let all = conversation_of(r);
    let p = all.as_str();
    let last = prompt_of(r);
    let seg0 = last.contains("The Velden Bridge is a stone arch bridge");
    let seg1 = last.contains("born in the city of Lucerne");
    let json = |s: &str| Scripted::Reply(s.to_string());
    if p.contains("Summary the context") {
        json(
            r#"{"summary": "The Velden Bridge was designed by Clara Hoffmann, an engineer from Lucerne."}"#,
        )
    } else if p.contains("You build the knowledge graph of a text segment") {
        if seg1 && !seg0 {
            if broken_entities_in_segment_1 {
                return json("Sorry, I cannot produce JSON today.");
            }
            // Ends as a model spells them: a possessive, a bare surname, an entity of another
            // segment that this one never names (dropped), a phrase that is no entity yet, and
            // a self-loop in another case.
            json(
                r#"{"entities": [{"name": "Clara Hoffmann", "type": "person"}, {"name": "Lucerne", "type": "location"}],
                   "relations": [
                     {"head": "Clara Hoffmann", "description": "Clara Hoffmann was born in Lucerne.", "tail": "Lucerne"},
                     {"head": "Hoffmann", "description": "Hoffmann designed bridges such as the Velden Bridge.", "tail": "Velden Bridge"},
                     {"head": "Hoffmann", "description": "Hoffmann was a civil engineer.", "tail": "engineer"},
                     {"head": "Hoffmann's", "description": "Hoffmann was among the first women admitted to the Swiss society of engineers.", "tail": "Swiss society of engineers"},
                     {"head": "Clara Hoffmann", "description": "Clara Hoffmann is Clara Hoffmann.", "tail": "clara hoffmann"}],
                   "questions": [{"question": "Where was Clara Hoffmann born?", "relations": []}]}"#,
            )
        } else {
            json(
                r#"{"entities": [{"name": "Velden Bridge", "type": "location"}, {"name": "Clara Hoffmann (1851-1923)", "type": "person"}, {"name": "Atlantis", "type": "location"}],
                   "relations": [
                     {"head": "Clara Hoffmann", "description": "Clara Hoffmann designed the Velden Bridge.", "tail": "Velden Bridge"},
                     {"head": "Clara Hoffmann", "description": "Clara Hoffmann was an engineer.", "tail": "engineer"},
                     {"head": "Nobody", "description": "Nobody crossed it.", "tail": "Velden Bridge"}],
                   "questions": [
                     {"question": "Who designed the Velden Bridge?", "relations": [{"head": "Velden Bridge", "description": "The Velden Bridge stands in Marlow Heath.", "tail": "Marlow Heath"}],
                      "entities": [{"name": "Marlow Heath", "type": "location"}]},
                     {"question": "Who designed the Velden Bridge first?", "relations": [{"head": "Velden Bridge", "description": "The Velden Bridge crosses the Aare.", "tail": "Aare"}]}]}"#,
            )
        }
    } else if p.contains("merge the corresponding relationships") {
        json(
            r#"{"questions": ["Did Hoffmann design other bridges?"], "description": "Clara Hoffmann designed the Velden Bridge, one of her bridges."}"#,
        )
    } else {
        Scripted::Fail(format!("unexpected prompt: {}", &p[..p.len().min(80)]))
    }
}

/// The structured-output policy of the scripted build and navigation tests: the paper's
/// (temperature 0, then up to 4 retries at 0.7) with the default frequency penalty.
pub fn policy() -> Policy {
    Policy {
        temperature: 0.0,
        max_tokens: 256,
        frequency_penalty: 0.5,
        json_retries: 4,
        retry_temperature: 0.7,
    }
}

pub fn params() -> BuildParams {
    let mut c = Config::default();
    c.memory.segment_tokens = 150;
    BuildParams::from_config(&c)
}

/// The scripted LLM answering as [`reply`] does (`broken`: segment 1's entities malformed),
/// and the service over it with [`policy`] and no reply cache.
pub fn service(broken: bool) -> (Arc<ScriptedLlm>, Service) {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(move |r| reply(r, broken)));
    let svc = Service::new(llm.clone(), None, policy());
    (llm, svc)
}

pub async fn build(broken: bool, params: BuildParams) -> (Memory, Arc<ScriptedLlm>) {
    let (llm, svc) = service(broken);
    (build_with(&svc, params, 2).await, llm)
}

/// The sample built through `svc` with `params`, `concurrency` calls at a time.
pub async fn build_with(svc: &Service, params: BuildParams, concurrency: usize) -> Memory {
    let prompts = Prompts::load().unwrap();
    Builder::new(svc, &prompts, params, concurrency)
        .build(DOC, Some(QUESTION), "velden.txt")
        .await
        .unwrap()
}
