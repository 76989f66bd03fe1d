//! Reading a large table a page of rows by id at a time: each statement
//! reads at most a page, whatever the rows hold, so that an operator's
//! command over a million rows never has one statement outlast the time
//! limit (one that went on until it found what it looked for read the
//! whole table once nothing was left).

use uuid::Uuid;

/// What one page of rows by id found, and where the next page starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page<T> {
    /// What the page found among its rows.
    pub found: T,
    /// The page's last id; `None`: no rows were left after the one it
    /// started after.
    pub last: Option<Uuid>,
    /// How many rows the page read (fewer than asked: it was the last).
    pub read: usize,
}

impl<T> Page<T> {
    /// The id the next page of `limit` rows starts after; `None` when this
    /// page was the last (a short page: no statement to find nothing).
    pub fn next_after(&self, limit: i64) -> Option<Uuid> {
        self.last
            .filter(|_| i64::try_from(self.read).is_ok_and(|read| read == limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_page_goes_on_after_its_last_row_and_a_short_one_ends() {
        let last = Some(Uuid::from_u128(7));
        let full = Page {
            found: (),
            last,
            read: 3,
        };
        assert_eq!(full.next_after(3), last);
        let short = Page {
            found: (),
            last,
            read: 2,
        };
        assert_eq!(short.next_after(3), None);
        let empty = Page {
            found: (),
            last: None,
            read: 0,
        };
        assert_eq!(empty.next_after(3), None);
    }
}
