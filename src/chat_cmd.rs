//! `qrmem chat`: one LLM round trip, parsed in `args.rs`.

use std::io::Read;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::args::ChatArgs;
use crate::{print_ledger, write_stdout};
use qrmem::config::Config;
use qrmem::llm::Service;

pub(crate) async fn chat(config: &Config, args: &ChatArgs) -> Result<()> {
    let prompt = if args.prompt == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the prompt from standard input")?;
        s
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }
    let schema: Option<serde_json::Value> = match &args.schema {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the schema {}", path.display()))?;
            Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("the schema {} is not JSON", path.display()))?,
            )
        }
        None => None,
    };
    let svc = Service::from_config(config)?;
    let started = Instant::now();
    let outcome = svc
        .chat_once(
            &args.stage,
            args.system.as_deref(),
            &prompt,
            schema,
            args.temperature,
            args.max_tokens,
        )
        .await
        .map(|(text, cut)| {
            if cut {
                eprintln!("(the reply was cut off at max_tokens; raise --max-tokens)");
            }
            text
        });
    let ledger = svc.ledger().snapshot();
    if let Some(path) = &args.ledger_out {
        std::fs::write(path, serde_json::to_vec_pretty(&ledger)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    match outcome {
        Ok(text) => {
            write_stdout(format_args!("{}\n", text.trim_end()))?;
            print_ledger(&ledger, started.elapsed());
            Ok(())
        }
        Err(e) => {
            print_ledger(&ledger, started.elapsed());
            Err(e.into())
        }
    }
}
