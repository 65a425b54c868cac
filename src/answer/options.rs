//! Multiple-choice questions: the question with its options, and the option letter of a reply.

/// The question with its options, as QuALITY presents them.
pub fn with_options(question: &str, options: &[String]) -> String {
    if options.is_empty() {
        return question.trim().to_string();
    }
    let mut s = question.trim().to_string();
    s.push_str("\nOptions:");
    for (i, o) in options.iter().enumerate() {
        s.push_str(&format!("\n({}) {}", (b'A' + i as u8) as char, o.trim()));
    }
    s
}

/// The option letter of a multiple-choice reply, or the reply itself when it names no option.
///
/// In order: a reply that starts with a letter ("(B) ...", "B) ...", "B. ...", "B"); a reply
/// that is, contains or begins one option's text (small models often copy the option instead of
/// its letter); a lone letter token ("The answer is B."); the one option whose words the reply
/// shares best (token F1 at least 0.5, strictly ahead of the others).
pub fn option_letter(reply: &str, options: &[String]) -> String {
    let letters: Vec<char> = (0..options.len().min(26))
        .map(|i| (b'A' + i as u8) as char)
        .collect();
    let t = reply.trim();
    for c in &letters {
        if [format!("({c})"), format!("{c})"), format!("{c}.")]
            .iter()
            .any(|p| t.starts_with(p.as_str()))
        {
            return c.to_string();
        }
    }
    if let Some(c) = letters.iter().find(|c| t == c.to_string()) {
        return c.to_string();
    }
    let words = |s: &str| -> Vec<String> {
        s.split(|ch: char| !ch.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let reply_words = words(t);
    let option_words: Vec<Vec<String>> = options.iter().map(|o| words(o)).collect();
    let unique = |hits: Vec<usize>| (hits.len() == 1).then(|| letters[hits[0]].to_string());
    if !reply_words.is_empty() {
        let joined = format!(" {} ", reply_words.join(" "));
        let exact: Vec<usize> = (0..letters.len())
            .filter(|&i| option_words[i] == reply_words)
            .collect();
        if let Some(l) = unique(exact) {
            return l;
        }
        // The reply quotes a whole option: the longest quoted one, if only one is that long.
        let quoted: Vec<usize> = (0..letters.len())
            .filter(|&i| {
                !option_words[i].is_empty()
                    && joined.contains(&format!(" {} ", option_words[i].join(" ")))
            })
            .collect();
        if let Some(longest) = quoted.iter().map(|&i| option_words[i].len()).max() {
            if let Some(l) = unique(
                quoted
                    .into_iter()
                    .filter(|&i| option_words[i].len() == longest)
                    .collect(),
            ) {
                return l;
            }
        }
        // The reply is the beginning of one option (a reply cut short), at least 3 words.
        if reply_words.len() >= 3 {
            let prefix: Vec<usize> = (0..letters.len())
                .filter(|&i| option_words[i].starts_with(&reply_words))
                .collect();
            if let Some(l) = unique(prefix) {
                return l;
            }
        }
    }
    for tok in t.split(|ch: char| !ch.is_alphanumeric()) {
        if tok.len() == 1 {
            if let Some(c) = letters.iter().find(|c| tok.starts_with(**c)) {
                return c.to_string();
            }
        }
    }
    let mut scored: Vec<(f64, usize)> = (0..letters.len())
        .map(|i| (word_f1(&reply_words, &option_words[i]), i))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    match scored.as_slice() {
        [(best, i), rest @ ..] if *best >= 0.5 && rest.iter().all(|(f, _)| f < best) => {
            letters[*i].to_string()
        }
        _ => t.to_string(),
    }
}

/// Token F1 of two word lists (multiset overlap).
fn word_f1(a: &[String], b: &[String]) -> f64 {
    let mut left: Vec<&String> = b.iter().collect();
    let mut common = 0usize;
    for w in a {
        if let Some(k) = left.iter().position(|x| *x == w) {
            left.swap_remove(k);
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let (p, r) = (
        common as f64 / a.len() as f64,
        common as f64 / b.len() as f64,
    );
    2.0 * p * r / (p + r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_letters() {
        let opts = vec!["Paris".to_string(), "Rome".to_string()];
        assert_eq!(
            with_options("Capital?", &opts),
            "Capital?\nOptions:\n(A) Paris\n(B) Rome"
        );
        let two = ["Paris".to_string(), "Rome".to_string()];
        assert_eq!(option_letter("(B) Rome", &two), "B");
        assert_eq!(option_letter("B", &two), "B");
        assert_eq!(option_letter("The answer is A.", &two), "A");
        assert_eq!(option_letter("Rome", &two), "B");
        assert_eq!(option_letter("Madrid", &two), "Madrid");
    }

    #[test]
    fn replies_that_copy_an_option_map_to_its_letter() {
        // Replies of the 0.5B model on QuALITY (eval/runs/quality), with that question's options.
        let o: Vec<String> = [
            "She had access to other space technologies to keep her youthful",
            "She was not youthful on Earth",
            "She painstakingly disciplined herself to keep wrinkles from forming",
            "She had travelled at light speed once before with Robert's dad",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // The option verbatim (with a curly apostrophe), cut short, or quoted in a sentence.
        let curly = "She had travelled at light speed once before with Robert\u{2019}s dad";
        assert_eq!(option_letter(curly, &o), "D");
        assert_eq!(
            option_letter("She painstakingly disciplined herself", &o),
            "C"
        );
        assert_eq!(
            option_letter("I think she was not youthful on Earth.", &o),
            "B"
        );
        // Close wording: the best option by shared words, only when clearly ahead.
        assert_eq!(
            option_letter("She travelled at light speed with Robert's dad", &o),
            "D"
        );
        assert_eq!(option_letter("She", &o), "She");
        assert_eq!(option_letter("Three", &o), "Three");
        // A leading letter wins over the words.
        assert_eq!(option_letter("D. She had access", &o), "D");
    }
}
