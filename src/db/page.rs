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
    fn next_after(&self, limit: i64) -> Option<Uuid> {
        self.last
            .filter(|_| i64::try_from(self.read).is_ok_and(|read| read == limit))
    }
}

impl<V> Page<Vec<V>> {
    /// The page of `rows` read in id order, each with its id, what the
    /// page keeps of it, and whether it keeps it (the statement reads a
    /// page of rows whatever they hold and says which ones it looked for).
    pub fn of_flagged(rows: Vec<(Uuid, V, bool)>) -> Self {
        Self {
            last: rows.last().map(|row| row.0),
            read: rows.len(),
            found: rows
                .into_iter()
                .filter_map(|(_, kept, flagged)| flagged.then_some(kept))
                .collect(),
        }
    }
}

/// Where a walk through a table by id stands, a page of `limit` rows at
/// a time from its first id: each page is read after the last one's last
/// row, until a short page ends the walk. The caller does each page's work
/// before it reads the next, so a run cut short keeps what it did.
#[derive(Debug, Clone, Copy)]
pub struct Walk {
    limit: i64,
    after: Option<Uuid>,
}

impl Walk {
    pub fn new(limit: i64) -> Self {
        Self {
            limit,
            after: Some(Uuid::nil()),
        }
    }

    /// How many rows a page reads.
    pub fn limit(&self) -> i64 {
        self.limit
    }

    /// The id the next page starts after; `None` once the walk has ended.
    pub fn next_after(&self) -> Option<Uuid> {
        self.after
    }

    /// Takes `page`, read after [`Self::next_after`], and gives what it
    /// found.
    pub fn past<T>(&mut self, page: Page<T>) -> T {
        self.after = page.next_after(self.limit);
        page.found
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

    #[test]
    fn a_flagged_page_keeps_the_flagged_rows_and_ends_at_the_last_row_read() {
        let rows = vec![
            (Uuid::from_u128(1), "a", true),
            (Uuid::from_u128(2), "b", false),
            (Uuid::from_u128(3), "c", true),
            (Uuid::from_u128(4), "d", false),
        ];
        let page = Page::of_flagged(rows);
        assert_eq!(page.found, vec!["a", "c"]);
        assert_eq!(page.last, Some(Uuid::from_u128(4)));
        assert_eq!(page.read, 4);
    }

    /// A table of ids 1..=`rows`, read a page after `after`.
    fn page_of(rows: u128, after: Uuid, limit: i64) -> Page<Vec<u128>> {
        let ids: Vec<u128> = (after.as_u128() + 1..=rows)
            .take(usize::try_from(limit).unwrap())
            .collect();
        Page {
            last: ids.last().map(|&id| Uuid::from_u128(id)),
            read: ids.len(),
            found: ids,
        }
    }

    #[test]
    fn a_walk_reads_each_page_after_the_last_and_ends_after_a_short_one() {
        for (rows, pages) in [(0, 1), (5, 2), (6, 3), (7, 3)] {
            let (mut walk, mut reads, mut seen) = (Walk::new(3), 0, Vec::new());
            while let Some(after) = walk.next_after() {
                reads += 1;
                seen.extend(walk.past(page_of(rows, after, walk.limit())));
            }
            assert_eq!(reads, pages, "{rows} rows");
            assert_eq!(seen, (1..=rows).collect::<Vec<_>>(), "{rows} rows");
        }
    }
}
