//! What `validate` (and `validate_for_serving`) refuse, each named by its
//! setting.

use super::{Settings, test_support::minimal};

fn error_with(extra: &[(&str, &str)]) -> String {
    let mut vars = minimal();
    for (k, v) in extra {
        vars.retain(|(name, _)| name != k);
        vars.push(((*k).into(), (*v).into()));
    }
    Settings::from_sources(None, vars, toml::Table::new())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

#[test]
fn insecure_http_with_an_https_public_url_is_refused() {
    let err = error_with(&[("MCP_CONNECT_INSECURE_HTTP", "true")]);
    assert!(err.contains("insecure_http"), "{err}");
    // On a loopback http URL it is what it is for.
    let err = error_with(&[
        ("MCP_CONNECT_INSECURE_HTTP", "true"),
        ("MCP_CONNECT_PUBLIC_URL", "http://127.0.0.1:8080"),
        ("MCP_CONNECT_AUTH__ISSUER", "http://127.0.0.1:9000"),
    ]);
    assert_eq!(err, "");
}

#[test]
fn a_public_url_with_a_path_is_refused_and_the_root_with_or_without_slash_is_not() {
    for prefixed in [
        "https://example.com/connect/",
        "https://example.com/connect",
    ] {
        let err = error_with(&[("MCP_CONNECT_PUBLIC_URL", prefixed)]);
        assert!(
            err.contains("public_url") && err.contains("without a path"),
            "{prefixed}: {err}"
        );
    }
    for root in [
        "https://connect.example.com",
        "https://connect.example.com/",
    ] {
        assert_eq!(
            error_with(&[("MCP_CONNECT_PUBLIC_URL", root)]),
            "",
            "{root}"
        );
    }
}

#[test]
fn allowed_origins_and_hosts_are_written_as_browsers_send_them() {
    for (origin, hint) in [
        (
            "https://app.example.com/",
            "write `https://app.example.com`",
        ),
        (
            "https://app.example.com:443",
            "write `https://app.example.com`",
        ),
        ("https://APP.example.com", "write `https://app.example.com`"),
        (
            "https://app.example.com/path",
            "write `https://app.example.com`",
        ),
        ("app.example.com", "not an http(s) origin"),
        ("ftp://app.example.com", "not an http(s) origin"),
        ("http://localhost:*", "port wildcard"),
    ] {
        let err = error_with(&[("MCP_CONNECT_ALLOWED_ORIGINS", origin)]);
        assert!(
            err.contains("allowed_origins") && err.contains(hint),
            "{origin}: {err}"
        );
    }
    for host in [
        "https://c.example.com",
        "c.example.com/mcp",
        "user@c.example.com",
    ] {
        let err = error_with(&[("MCP_CONNECT_ALLOWED_HOSTS", host)]);
        assert!(err.contains("allowed_hosts"), "{host}: {err}");
        let err = error_with(&[("MCP_CONNECT_CLIENTS__METADATA_TRUSTED_HOSTS", host)]);
        assert!(
            err.contains("clients.metadata_trusted_hosts"),
            "{host}: {err}"
        );
    }
    for (host, write) in [
        ("127.1", "127.0.0.1"),
        ("[0::1]", "[::1]"),
        ("bücher.example", "xn--bcher-kva.example"),
    ] {
        let err = error_with(&[("MCP_CONNECT_CLIENTS__METADATA_TRUSTED_HOSTS", host)]);
        assert!(
            err.contains("metadata_trusted_hosts") && err.contains(&format!("write `{write}`")),
            "{host}: {err}"
        );
    }
    // Port 443 is never in the Host of a request for https://…: the entry
    // would refuse every one.
    for (host, write) in [
        ("connect.example.com:443", "connect.example.com"),
        ("[::1]:443", "[::1]"),
    ] {
        let err = error_with(&[("MCP_CONNECT_ALLOWED_HOSTS", host)]);
        assert!(
            err.contains("allowed_hosts") && err.contains(&format!("write `{write}`")),
            "{host}: {err}"
        );
    }
    // Nor 80 (or 443) in one for http://…; other ports are kept.
    let loopback = [
        ("MCP_CONNECT_PUBLIC_URL", "http://127.0.0.1:8080"),
        ("MCP_CONNECT_INSECURE_HTTP", "true"),
    ];
    for (host, refused) in [
        ("127.0.0.1:80", true),
        ("127.0.0.1:8080", false),
        ("127.0.0.1:443", true),
    ] {
        let err = error_with(&[
            loopback[0],
            loopback[1],
            ("MCP_CONNECT_ALLOWED_HOSTS", host),
        ]);
        assert_eq!(err.contains("write `127.0.0.1`"), refused, "{host}: {err}");
        assert_eq!(err.is_empty(), !refused, "{host}: {err}");
    }
    let fine = error_with(&[
        (
            "MCP_CONNECT_ALLOWED_ORIGINS",
            "https://app.example.com, http://127.0.0.1:8080, null",
        ),
        (
            "MCP_CONNECT_ALLOWED_HOSTS",
            "c.example.com, c.example.com:8443, [::1]:8080, ::1",
        ),
        (
            "MCP_CONNECT_CLIENTS__METADATA_TRUSTED_HOSTS",
            "registry.internal, Registry.Internal:8443, 10.0.0.5, [::1]:8443",
        ),
    ]);
    assert_eq!(fine, "");
}

#[test]
fn plain_http_identity_urls_are_refused_off_loopback() {
    for (var, value, key) in [
        (
            "MCP_CONNECT_AUTH__ISSUER",
            "http://idp.example.com",
            "auth.issuer",
        ),
        (
            "MCP_CONNECT_AUTH__JWKS_URL",
            "http://idp.example.com/jwks",
            "auth.jwks_url",
        ),
        (
            "MCP_CONNECT_AUTH__INTROSPECTION__URL",
            "http://idp.example.com/introspect",
            "auth.introspection.url",
        ),
    ] {
        let err = error_with(&[
            (var, value),
            ("MCP_CONNECT_AUTH__INTROSPECTION__CLIENT_ID", "rs"),
            ("MCP_CONNECT_AUTH__INTROSPECTION__CLIENT_SECRET", "s"),
            (
                "MCP_CONNECT_AUTH__INTROSPECTION__URL",
                if key == "auth.introspection.url" {
                    value
                } else {
                    "https://idp.example.com/introspect"
                },
            ),
        ]);
        assert!(err.contains(&format!("`{key}`")), "{key}: {err}");
        assert!(err.contains("https"), "{err}");
    }
    for issuer in [
        "http://127.0.0.1:9000",
        "http://localhost:9000",
        "http://[::1]:9000",
    ] {
        assert_eq!(
            error_with(&[("MCP_CONNECT_AUTH__ISSUER", issuer)]),
            "",
            "{issuer}"
        );
    }
}

#[test]
fn unknown_nested_keys_are_named_once() {
    let err = error_with(&[("MCP_CONNECT_AUTH__ISUER", "https://x.example")]);
    assert!(err.contains("`auth.isuer`"), "{err}");
    assert!(!err.contains("isuer.isuer"), "{err}");
    assert!(err.contains("MCP_CONNECT_AUTH__ISUER)"), "{err}");
    let err = error_with(&[("MCP_CONNECT_PUBLIK_URL", "x")]);
    assert!(err.contains("`publik_url`"), "{err}");
}

#[test]
fn database_urls_must_be_postgres_with_a_server_and_a_database() {
    for url in [
        "localhost:5432",
        "mysql://localhost/x",
        "postgres://localhost",
        "postgres://localhost/",
        "postgresql:///x",
        "postgres:///x?host=",
        "postgres:///?host=/var/run/postgresql",
        "x",
    ] {
        let err = error_with(&[("MCP_CONNECT_DATABASE_URL", url)]);
        assert!(err.contains("`database_url`"), "{url}: {err}");
        assert!(
            !err.contains(url),
            "the URL (a secret) is not echoed: {err}"
        );
    }
    for url in [
        "postgres://u:p@db.example:5432/app",
        "postgresql://localhost/x?sslmode=require",
        // A Unix socket: its directory is the `host` parameter.
        "postgres:///mcp_connect?host=/var/run/postgresql",
        "postgresql:///mcp_connect?host=%2Frun%2Fpostgresql&user=app",
        "postgres:///mcp_connect?hostaddr=10.0.0.5",
    ] {
        assert_eq!(
            error_with(&[("MCP_CONNECT_DATABASE_URL", url)]),
            "",
            "{url}"
        );
    }
}

/// A URL the parser refuses says why (the parser's words, which never
/// quote the URL), and where it has a user part, which characters of a
/// password must be percent-encoded: `/`, `?` and `#` end the host early
/// (a password beginning with digits then reads as a port), and `%` with
/// two hex digits is decoded. `@` and `:` in a password need nothing.
#[test]
fn a_malformed_database_url_says_why_and_how_to_write_a_password() {
    for (url, why) in [
        ("postgres://u:PW/LEAK@127.0.0.1/x", "invalid port number"),
        ("postgres://u:PW?LEAK@127.0.0.1/x", "invalid port number"),
        ("postgres://u:12/LEAK@127.0.0.1/x", "must name the database"),
        ("postgres://u:12#LEAK@127.0.0.1/x", "must name the database"),
    ] {
        let err = error_with(&[("MCP_CONNECT_DATABASE_URL", url)]);
        assert!(
            err.contains("`database_url`") && err.contains(why),
            "{url}: {err}"
        );
        assert!(
            err.contains("`/` as %2F") && err.contains("`%` as %25"),
            "{url}: {err}"
        );
        assert!(!err.contains("LEAK") && !err.contains("PW"), "{url}: {err}");
    }
    let err = error_with(&[("MCP_CONNECT_DATABASE_URL", "postgres://127.0.0.1:99999/x")]);
    assert!(err.contains("invalid port number"), "{err}");
    assert!(!err.contains("%2F"), "no password, no hint: {err}");
    for password in ["p@ss", "p:ss", "p+ss", "p%2Fss"] {
        let url = format!("postgres://u:{password}@127.0.0.1:5432/x");
        assert_eq!(
            error_with(&[("MCP_CONNECT_DATABASE_URL", &url)]),
            "",
            "{url}"
        );
    }
}

#[test]
fn serving_needs_a_provider_and_a_web_client() {
    let settings = Settings::from_sources(None, minimal(), toml::Table::new()).unwrap();
    let err = settings.validate_for_serving().unwrap_err().to_string();
    assert!(err.contains("`providers`"), "{err}");
    let mut table = toml::Table::new();
    let mut github = toml::Table::new();
    github.insert("client_id".into(), "a".into());
    let mut providers = toml::Table::new();
    providers.insert("github".into(), github.into());
    table.insert("providers".into(), providers.into());
    let settings = Settings::from_sources(None, minimal(), table.clone()).unwrap();
    let err = settings.validate_for_serving().unwrap_err().to_string();
    assert!(err.contains("`auth.web_client_id`"), "{err}");
    assert!(err.contains("MCP_CONNECT_AUTH__WEB_CLIENT_ID"), "{err}");
    let mut vars = minimal();
    vars.push(("MCP_CONNECT_AUTH__WEB_CLIENT_ID".into(), "web".into()));
    let settings = Settings::from_sources(None, vars, table).unwrap();
    assert!(settings.validate_for_serving().is_ok());
}

#[test]
fn keep_alive_secs_must_be_between_1_and_300() {
    for bad in ["0", "301"] {
        let err = error_with(&[("MCP_CONNECT_KEEP_ALIVE_SECS", bad)]);
        assert!(err.contains("`keep_alive_secs`"), "{bad}: {err}");
        assert!(err.contains("between 1 and 300"), "{bad}: {err}");
    }
    for good in ["1", "75", "300"] {
        assert_eq!(
            error_with(&[("MCP_CONNECT_KEEP_ALIVE_SECS", good)]),
            "",
            "{good}"
        );
    }
    let settings = Settings::from_sources(None, minimal(), toml::Table::new()).unwrap();
    assert_eq!(settings.keep_alive(), std::time::Duration::from_secs(15));
}

#[test]
fn accounts_per_provider_must_be_between_1_and_1000() {
    for bad in ["0", "1001"] {
        let err = error_with(&[("MCP_CONNECT_FLOW__ACCOUNTS_PER_PROVIDER", bad)]);
        assert!(err.contains("flow.accounts_per_provider"), "{bad}: {err}");
        assert!(err.contains("between 1 and 1000"), "{bad}: {err}");
    }
    assert_eq!(
        error_with(&[("MCP_CONNECT_FLOW__ACCOUNTS_PER_PROVIDER", "3")]),
        ""
    );
    let settings = Settings::from_sources(None, minimal(), toml::Table::new()).unwrap();
    assert_eq!(settings.flow.accounts_per_provider, 20);
}

#[test]
fn revocations_are_retried_for_1_to_720_hours() {
    for bad in ["0", "721"] {
        let err = error_with(&[("MCP_CONNECT_REVOCATION__RETRY_HOURS", bad)]);
        assert!(err.contains("revocation.retry_hours"), "{bad}: {err}");
        assert!(err.contains("between 1 and 720"), "{bad}: {err}");
    }
    assert_eq!(
        error_with(&[("MCP_CONNECT_REVOCATION__RETRY_HOURS", "1")]),
        ""
    );
    let settings = Settings::from_sources(None, minimal(), toml::Table::new()).unwrap();
    assert_eq!(settings.revocation.retry_for(), chrono::Duration::hours(72));
}

#[test]
fn revocations_due_are_looked_for_at_least_four_times_within_their_window() {
    let both = |hours: &str, every: &str| {
        error_with(&[
            ("MCP_CONNECT_REVOCATION__RETRY_HOURS", hours),
            ("MCP_CONNECT_REVOCATION__RETRY_EVERY_SECS", every),
        ])
    };
    let err = both("1", "901");
    assert!(err.contains("revocation.retry_every_secs"), "{err}");
    assert!(err.contains("at most a quarter"), "{err}");
    assert!(err.contains("900 s with a window of 1 h"), "{err}");
    assert_eq!(both("1", "900"), "");
    assert_eq!(both("2", "1800"), "");
}

#[test]
fn revocations_due_are_looked_for_every_10_to_3600_seconds() {
    for bad in ["9", "3601"] {
        let err = error_with(&[("MCP_CONNECT_REVOCATION__RETRY_EVERY_SECS", bad)]);
        assert!(err.contains("revocation.retry_every_secs"), "{bad}: {err}");
        assert!(err.contains("between 10 and 3600"), "{bad}: {err}");
    }
    assert_eq!(
        error_with(&[("MCP_CONNECT_REVOCATION__RETRY_EVERY_SECS", "10")]),
        ""
    );
}

/// The shipped Caddyfile drops its idle connections to an instance before
/// an instance with the default `keep_alive_secs` would: the other way
/// round, a POST sent on a connection the instance is closing is lost.
#[test]
fn the_shipped_proxy_lets_go_of_idle_connections_first() {
    let caddyfile = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/Caddyfile"));
    let proxy_secs: u64 = caddyfile
        .lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix("keepalive ")?
                .strip_suffix('s')?
                .parse()
                .ok()
        })
        .expect("deploy/Caddyfile sets `keepalive <N>s` for its upstreams");
    assert!(
        proxy_secs < super::defaults::keep_alive_secs(),
        "Caddy keeps idle upstream connections {proxy_secs} s, the instances {} s",
        super::defaults::keep_alive_secs()
    );
}

/// A URL setting's value quoted in an error shows no user or password,
/// whatever the setting is called.
#[test]
fn a_url_setting_s_password_is_never_shown() {
    for (var, value) in [
        (
            "MCP_CONNECT_AUTH__ISSUER",
            "https://u:SECRET-1@idp.example.com:99999/",
        ),
        (
            "MCP_CONNECT_PUBLIC_URL",
            "https://u:SECRET/1@connect.example.com/",
        ),
        (
            "MCP_CONNECT_ALLOWED_ORIGINS",
            "https://u:SECRET-1@app.example.com/",
        ),
    ] {
        let err = error_with(&[(var, value)]);
        assert!(!err.is_empty(), "{var}");
        assert!(!err.contains("SECRET"), "{var}: {err}");
    }
}

/// A user or password in `public_url` or an identity URL is refused: the
/// first is in every link and page, the issuer in the published metadata,
/// and both in every start's log; none of them authenticates that way.
#[test]
fn urls_shown_or_published_carry_no_user_or_password() {
    let introspection = [
        ("MCP_CONNECT_AUTH__INTROSPECTION__CLIENT_ID", "rs"),
        ("MCP_CONNECT_AUTH__INTROSPECTION__CLIENT_SECRET", "s"),
    ];
    for (var, value, key) in [
        (
            "MCP_CONNECT_PUBLIC_URL",
            "https://ops:SECRET@connect.example.com",
            "public_url",
        ),
        (
            "MCP_CONNECT_PUBLIC_URL",
            "https://ops@connect.example.com",
            "public_url",
        ),
        (
            "MCP_CONNECT_AUTH__ISSUER",
            "https://ops:SECRET@idp.example.com",
            "auth.issuer",
        ),
        (
            "MCP_CONNECT_AUTH__JWKS_URL",
            "https://ops:SECRET@idp.example.com/jwks",
            "auth.jwks_url",
        ),
        (
            "MCP_CONNECT_AUTH__INTROSPECTION__URL",
            "https://:SECRET@idp.example.com/introspect",
            "auth.introspection.url",
        ),
    ] {
        let mut vars = vec![(var, value)];
        if key == "auth.introspection.url" {
            vars.extend(introspection);
        }
        let err = error_with(&vars);
        assert!(err.contains(&format!("`{key}`")), "{key}: {err}");
        assert!(err.contains("user or password"), "{key}: {err}");
        assert!(!err.contains("SECRET"), "{key}: {err}");
    }
}
