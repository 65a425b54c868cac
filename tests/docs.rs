//! The repository's markdown renders: every table row has as many cells as its header (GitHub
//! drops the cells past the header's and splits a cell at an unescaped `|`, even inside code),
//! and the README's first screen stays a first screen.

use std::path::{Path, PathBuf};

/// Every markdown file under `dir`, skipping build output and hidden directories.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The cells of a table row: the text between unescaped pipes, the outer pipes dropped.
fn cells(row: &str) -> usize {
    let row = row.trim();
    let mut n = 0;
    let mut after_backslash = false;
    for c in row.chars() {
        if c == '|' && !after_backslash {
            n += 1;
        }
        after_backslash = c == '\\' && !after_backslash;
    }
    let leading = row.starts_with('|');
    let trailing = row.ends_with('|') && !row.ends_with("\\|");
    n + 1 - usize::from(leading) - usize::from(trailing)
}

fn is_delimiter(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') && t.contains('-') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// The rows of `text`'s tables whose cell count differs from their header's: (line, found,
/// expected). Tables inside fenced code blocks are text, not tables.
fn bad_rows(text: &str) -> Vec<(usize, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut bad = Vec::new();
    let mut fenced = false;
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with("```") {
            fenced = !fenced;
            i += 1;
            continue;
        }
        if !fenced
            && lines[i].trim_start().starts_with('|')
            && i + 1 < lines.len()
            && is_delimiter(lines[i + 1])
        {
            let expected = cells(lines[i]);
            if cells(lines[i + 1]) != expected {
                bad.push((i + 2, cells(lines[i + 1]), expected));
            }
            let mut j = i + 2;
            while j < lines.len() && lines[j].trim_start().starts_with('|') {
                let found = cells(lines[j]);
                if found != expected {
                    bad.push((j + 1, found, expected));
                }
                j += 1;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    bad
}

#[test]
fn the_cell_counter_reads_escapes_and_code() {
    assert_eq!(cells("| a | b |"), 2);
    assert_eq!(cells("| `x \\| y` | b |"), 2);
    assert_eq!(cells("| `|E_s|` | b |"), 4);
    assert_eq!(
        bad_rows("| a | b |\n|---|---|\n| 1 | 2 |\n| 1 | 2 | 3 |\n"),
        vec![(4, 3, 2)]
    );
    assert!(bad_rows("```\n| a |\n|---|\n| 1 | 2 |\n```\n").is_empty());
}

#[test]
fn every_committed_markdown_table_renders_with_its_headers_cells() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    assert!(files.len() > 10, "found only {files:?}");
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, found, expected) in bad_rows(&text) {
            problems.push(format!(
                "{}:{line}: {found} cells under a header of {expected}",
                f.strip_prefix(root).unwrap_or(f).display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_is_a_first_screen_with_the_results() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.len() <= 12 * 1024,
        "README.md is {} bytes",
        readme.len()
    );
    let results = readme.find("## Results").expect("a Results section");
    let lines_before = readme[..results].lines().count();
    assert!(
        lines_before < 40,
        "the results start at line {lines_before}"
    );
    let eval = std::fs::read_to_string(root.join("eval/README.md")).unwrap();
    assert!(
        eval.len() <= 15 * 1024,
        "eval/README.md is {} bytes",
        eval.len()
    );
}
