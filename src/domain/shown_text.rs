//! Which characters of an outsider's text (a client's name from its
//! metadata document, a person's name from the identity provider) may
//! reach a page. Control characters are dropped, and so are the ones a
//! reader cannot see but that change what they see: direction overrides
//! and isolates (U+202E can make `gpj.exe` read as `exe.jpg`), zero-width
//! spaces, line and paragraph separators, and the other default-ignorable
//! code points but the joiners and variation selectors that scripts and
//! emoji need. Templates escape HTML; this is about what a person reads.

/// The most characters of an account's label: as the provider names the
/// account, or as its person renamed it.
pub const MAX_LABEL_CHARS: usize = 64;

/// An outsider's `text` as it is stored and shown: what a reader cannot
/// see dropped, trimmed, and at most `max_chars` characters, an ellipsis
/// included where it was cut.
pub fn shown(text: &str, max_chars: usize) -> String {
    let clean: String = text.chars().filter(|&c| is_shown(c)).collect();
    let clean = clean.trim();
    if clean.chars().nth(max_chars).is_none() {
        return clean.to_owned();
    }
    let mut shown: String = clean.chars().take(max_chars.saturating_sub(1)).collect();
    shown.push('…');
    shown
}

/// Whether `c` may be shown as part of an outsider's text.
pub fn is_shown(c: char) -> bool {
    !c.is_control() && !is_invisible(c)
}

/// Unicode's Default_Ignorable_Code_Point set, the bidirectional marks
/// among them, and the line and paragraph separators — but for the
/// joiners (U+200C, U+200D), variation selectors and emoji tags, which
/// Persian and Indic names and emoji (a subdivision's flag) need to read
/// as they are written.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}'
        | '\u{034F}'
        | '\u{061C}'
        | '\u{115F}'..='\u{1160}'
        | '\u{17B4}'..='\u{17B5}'
        | '\u{180E}'
        | '\u{200B}'
        | '\u{200E}'..='\u{200F}'
        | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}'
        | '\u{3164}'
        | '\u{FEFF}'
        | '\u{FFA0}'
        | '\u{FFF0}'..='\u{FFF8}'
        | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E001F}'
        | '\u{E0080}'..='\u{E00FF}'
        | '\u{E01F0}'..='\u{E0FFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_reader_cannot_see_is_not_shown() {
        let shown = |s: &str| s.chars().filter(|&c| is_shown(c)).collect::<String>();
        assert_eq!(shown("Good\u{202E}gpj.exe"), "Goodgpj.exe");
        assert_eq!(
            shown("A\u{200B}BC\u{FEFF}D\u{2066}E\u{2069}\u{200E}"),
            "ABCDE"
        );
        assert_eq!(shown("line\u{2028}para\u{2029}\u{7}\n"), "linepara");
        // Letters of every script, accents and emoji stay.
        assert_eq!(shown("Zoë 助手 Ассистент 🤖"), "Zoë 助手 Ассистент 🤖");
        // Joiners and variation selectors make words and emoji.
        for kept in [
            "می\u{200C}خواهم",
            "👩\u{200D}💻",
            "❤\u{FE0F}",
            "🏴\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}",
        ] {
            assert_eq!(shown(kept), kept);
        }
    }

    #[test]
    fn shown_text_is_cleaned_trimmed_and_cut() {
        assert_eq!(shown(" work\u{202E}txt.exe ", 64), "worktxt.exe");
        assert_eq!(shown(&"x".repeat(70), 64), format!("{}…", "x".repeat(63)));
        assert_eq!(shown(&"x".repeat(70), 64).chars().count(), 64);
        assert_eq!(shown(&"é".repeat(64), 64), "é".repeat(64));
        assert_eq!(shown("\u{200B}\u{7}", 64), "");
    }
}
