//! Cutting a looping reply. A small model sometimes writes one JSON array element again and
//! again until the schema's item limit or `max_tokens` (one extraction reply held the same
//! triple 28 times): every copy costs generation time and brings nothing. [`RepeatCut`] reads a
//! reply as it streams in and says when a watched array (every array, or those under one
//! object key) has received an element it already holds more than the allowed number of times;
//! the reply kept is the text before that element with its open arrays and objects closed, so
//! it parses and keeps everything written before the loop.

use std::collections::HashMap;

/// An open array or object of the reply being read.
struct Frame {
    array: bool,
    /// Whether this array's repeats count (arrays only).
    watched: bool,
    /// The last string closed directly inside this object: the key of the value that follows.
    last_string: Option<String>,
    /// Byte offset where the array's current element began (arrays only).
    start: Option<usize>,
    /// Copies of each finished element of this array, by its exact text.
    copies: HashMap<String, usize>,
}

/// The incremental reader (see the module's documentation).
pub struct RepeatCut {
    /// Copies of one element an array may hold; the next copy cuts the reply.
    allowed: usize,
    /// Only the arrays that are the value of this key are watched (None: every array).
    key: Option<String>,
    text: String,
    /// Bytes of `text` read so far.
    read: usize,
    stack: Vec<Frame>,
    in_string: bool,
    escaped: bool,
    string_start: usize,
    /// Where the reply was cut: the byte offset of the repeated element.
    cut_at: Option<usize>,
}

impl RepeatCut {
    /// A reader that cuts the reply when an element of an array under `key` (of any array
    /// when None) is written more than `allowed` times (at least once).
    pub fn new(allowed: usize, key: Option<&str>) -> Self {
        RepeatCut {
            allowed: allowed.max(1),
            key: key.map(str::to_string),
            text: String::new(),
            read: 0,
            stack: Vec::new(),
            in_string: false,
            escaped: false,
            string_start: 0,
            cut_at: None,
        }
    }

    /// Adds the next piece of the streamed reply. True once the reply repeated an element:
    /// the caller stops reading (later pieces are ignored).
    pub fn push(&mut self, piece: &str) -> bool {
        if self.cut_at.is_some() {
            return true;
        }
        self.text.push_str(piece);
        let start = self.read;
        let bytes: Vec<(usize, char)> = self.text[start..]
            .char_indices()
            .map(|(i, c)| (start + i, c))
            .collect();
        for (at, c) in bytes {
            self.read = at + c.len_utf8();
            if self.step(at, c) {
                return true;
            }
        }
        false
    }

    /// Whether the reply was cut.
    pub fn was_cut(&self) -> bool {
        self.cut_at.is_some()
    }

    /// The reply to keep: all text received when nothing repeated; otherwise the text before
    /// the repeated element, without its trailing comma, with the open arrays and objects
    /// closed innermost first.
    pub fn reply(&self) -> String {
        let Some(at) = self.cut_at else {
            return self.text.clone();
        };
        let mut kept = self.text[..at].trim_end().to_string();
        if kept.ends_with(',') {
            kept.pop();
        }
        for frame in self.stack.iter().rev() {
            kept.push(if frame.array { ']' } else { '}' });
        }
        kept
    }

    /// Reads one character at byte offset `at`; true when it finished a repeated element.
    fn step(&mut self, at: usize, c: char) -> bool {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == '"' {
                self.in_string = false;
                let began = self.string_start;
                if self.top_array_start() == Some(began) {
                    return self.finish_element(began, at + 1);
                }
                if let Some(frame) = self.stack.last_mut().filter(|f| !f.array) {
                    frame.last_string = Some(self.text[began + 1..at].to_string());
                }
            }
            return false;
        }
        match c {
            '"' => {
                self.begin_element(at);
                self.in_string = true;
                self.string_start = at;
            }
            '[' | '{' => {
                self.begin_element(at);
                let key = self
                    .stack
                    .last()
                    .filter(|f| !f.array)
                    .and_then(|f| f.last_string.as_deref());
                let watched = c == '[' && self.key.as_deref().is_none_or(|k| key == Some(k));
                self.stack.push(Frame {
                    array: c == '[',
                    watched,
                    last_string: None,
                    start: None,
                    copies: HashMap::new(),
                });
            }
            ']' | '}' => {
                // A number or literal ends at its array's closing bracket.
                if let Some(began) = self.top_array_start() {
                    if self.finish_element(began, at) {
                        return true;
                    }
                }
                self.stack.pop();
                if let Some(began) = self.top_array_start() {
                    return self.finish_element(began, at + 1);
                }
            }
            ',' => {
                if let Some(began) = self.top_array_start() {
                    return self.finish_element(began, at);
                }
            }
            c if c.is_whitespace() || c == ':' => {}
            _ => self.begin_element(at),
        }
        false
    }

    /// The start of the current element when the innermost open value is an array.
    fn top_array_start(&self) -> Option<usize> {
        self.stack.last().filter(|f| f.array).and_then(|f| f.start)
    }

    fn begin_element(&mut self, at: usize) {
        if let Some(frame) = self.stack.last_mut().filter(|f| f.array) {
            frame.start.get_or_insert(at);
        }
    }

    /// Counts the element `text[began..end]` in its array; true (and the cut recorded) when
    /// that makes one copy too many.
    fn finish_element(&mut self, began: usize, end: usize) -> bool {
        let element = self.text[began..end].trim().to_string();
        let Some(frame) = self.stack.last_mut() else {
            return false;
        };
        frame.start = None;
        if !frame.watched {
            return false;
        }
        let copies = frame.copies.entry(element).or_insert(0);
        *copies += 1;
        if *copies > self.allowed {
            self.cut_at = Some(began);
            return true;
        }
        false
    }
}

/// The whole-text form of [`RepeatCut`]: `Some(kept reply)` when `text` repeats an element of
/// a watched array more than `allowed` times, `None` when it does not.
pub fn cut_repeats(text: &str, allowed: usize, key: Option<&str>) -> Option<String> {
    let mut reader = RepeatCut::new(allowed, key);
    reader.push(text).then(|| reader.reply())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    #[test]
    fn a_looping_triple_list_is_closed_before_the_second_copy() {
        let reply = r#"{"entities": [["Aare", "location"]], "triples": [["A", "b", "C"], ["D", "e", "F"], ["A", "b", "C"], ["A", "b", "C"]"#;
        let kept = cut_repeats(reply, 1, None).expect("cut");
        assert_eq!(
            parsed(&kept),
            json!({"entities": [["Aare", "location"]], "triples": [["A", "b", "C"], ["D", "e", "F"]]})
        );
    }

    #[test]
    fn streamed_in_pieces_it_stops_at_the_same_place() {
        let reply = r#"{"questions": ["Who?"], "triples": [["A", "b", "C"], ["A", "b", "C"], ["X", "y", "Z"]]}"#;
        let mut reader = RepeatCut::new(1, None);
        let mut stopped_after = None;
        for (i, piece) in reply.as_bytes().chunks(3).enumerate() {
            let piece = std::str::from_utf8(piece).expect("ascii");
            if reader.push(piece) {
                stopped_after = Some(i);
                break;
            }
        }
        assert!(stopped_after.is_some(), "the reader stops the stream");
        assert_eq!(
            parsed(&reader.reply()),
            json!({"questions": ["Who?"], "triples": [["A", "b", "C"]]})
        );
    }

    #[test]
    fn allowed_copies_are_kept() {
        let reply = r#"{"t": [["A"], ["A"], ["B"], ["A"]]}"#;
        assert_eq!(
            cut_repeats(reply, 2, None).map(|k| parsed(&k)),
            Some(json!({"t": [["A"], ["A"], ["B"]]}))
        );
        assert_eq!(cut_repeats(reply, 3, None), None);
    }

    #[test]
    fn repeated_names_inside_different_elements_are_not_a_loop() {
        let reply = r#"{"triples": [["Karl Weber", "was born in", "Lyon"], ["Karl Weber", "was", "a painter"]], "entities": ["Lyon", "Bern"], "n": [1, 2]}"#;
        assert_eq!(cut_repeats(reply, 1, None), None);
        let mut reader = RepeatCut::new(1, None);
        assert!(!reader.push(reply));
        assert_eq!(reader.reply(), reply, "an uncut reply is kept whole");
    }

    #[test]
    fn strings_numbers_and_escapes_count_as_elements() {
        assert_eq!(
            cut_repeats(r#"{"q": ["a \"x\", [b]", "a \"x\", [b]"]}"#, 1, None).map(|k| parsed(&k)),
            Some(json!({"q": ["a \"x\", [b]"]}))
        );
        assert_eq!(
            cut_repeats("[1, 2, 1]", 1, None).map(|k| parsed(&k)),
            Some(json!([1, 2]))
        );
        assert_eq!(cut_repeats("[1, 2, 3]", 1, None), None);
    }

    #[test]
    fn elements_of_different_arrays_are_counted_apart() {
        let reply = r#"{"a": [["X"]], "b": [["X"]]}"#;
        assert_eq!(cut_repeats(reply, 1, None), None);
    }

    #[test]
    fn a_keyed_reader_watches_only_the_array_under_its_key() {
        let reply = r#"{"entities": [["Bern", "location"], ["Bern", "location"], ["Bern", "location"]], "triples": [["A", "b", "C"], ["A", "b", "C"], ["A", "b", "C"], ["D", "e", "F"]]}"#;
        assert_eq!(
            cut_repeats(reply, 2, Some("triples")).map(|k| parsed(&k)),
            Some(json!({
                "entities": [["Bern", "location"], ["Bern", "location"], ["Bern", "location"]],
                "triples": [["A", "b", "C"], ["A", "b", "C"]]
            }))
        );
        // A string value equal to the key does not make its array watched.
        let other = r#"{"note": "triples", "list": [1, 1, 1]}"#;
        assert_eq!(cut_repeats(other, 1, Some("triples")), None);
        assert!(cut_repeats(other, 1, Some("list")).is_some());
    }
}
