//! Requests outside `/mcp` (the web pages, OAuth callbacks, discovery
//! documents, health), by route and status class. The route is the pattern
//! the request matched (`/oauth/callback/{provider}`), so its values come
//! from the application's own routes; a request that matched none counts as
//! `other`.

use std::{collections::BTreeMap, sync::Mutex};

use super::{
    labels::{STATUS_LABELS, status},
    text::{Exposition, Kind},
};

#[derive(Default)]
pub struct PageMetrics {
    /// (route, status class) → count. Bounded by routes × 6.
    counts: Mutex<BTreeMap<(String, usize), u64>>,
}

impl PageMetrics {
    pub fn request(&self, route: Option<&str>, code: u16) {
        let route = route.unwrap_or("other");
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry((route.to_owned(), status(code))).or_default() += 1;
        }
    }

    pub fn write(&self, e: &mut Exposition) {
        const NAME: &str = "mcp_connect_page_requests_total";
        e.family(
            NAME,
            Kind::Counter,
            "Requests outside /mcp by route pattern and HTTP status class.",
        );
        let Ok(counts) = self.counts.lock() else {
            return;
        };
        for ((route, class), n) in counts.iter() {
            e.sample(
                NAME,
                &[("route", route), ("status", STATUS_LABELS[*class])],
                *n as f64,
            );
        }
    }
}
