//! The catalog as operators see it (settings merged over shipped entries),
//! and every shipped entry checked as data.

use super::*;
use crate::providers::{TokenHint, check, shipped, test_catalog::settings_with};

fn error_of(providers_toml: &str) -> String {
    let settings = settings_with("https://connect.example.com", providers_toml);
    ProviderCatalog::from_settings(&settings)
        .unwrap_err()
        .to_string()
}

fn catalog_of(providers_toml: &str) -> ProviderCatalog {
    let settings = settings_with("https://connect.example.com/", providers_toml);
    ProviderCatalog::from_settings(&settings).unwrap()
}

#[test]
fn entries_fill_everything_but_credentials() {
    let catalog = catalog_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         [providers.work]\npreset = \"google\"\nclient_id = \"c\"\nclient_secret = \"d\"\n",
    );
    assert_eq!(catalog.names(), vec!["github", "work"]);
    let gh = catalog.get("github").unwrap();
    assert_eq!(gh.display_name(), "GitHub");
    assert_eq!(gh.default_scopes(), ["read:user".to_string()]);
    assert_eq!(
        gh.redirect_uri(),
        "https://connect.example.com/oauth/callback/github"
    );
    // GitHub deletes the connection's token, sent alone.
    assert!(gh.revokes(TokenHint::AccessToken));
    assert!(!gh.revokes(TokenHint::RefreshToken));
    assert_eq!(gh.issuer(), None);
    assert_eq!(gh.refresh_behaviour(), "non_expiring");
    assert_eq!(gh.credential_kind(), "oauth2");
    let work = catalog.get("work").unwrap();
    assert_eq!(work.preset(), "google");
    assert_eq!(work.issuer(), Some("https://accounts.google.com"));
    assert!(work.supports_revocation());
    assert_eq!(
        work.account_chooser(),
        [("prompt".to_owned(), "select_account consent".to_owned())]
    );
    assert!(catalog.get("gitlab").is_none());
    assert!(!format!("{catalog:?}").contains("\"b\""));
}

#[test]
fn operators_override_any_field_and_tables_merge() {
    let catalog = catalog_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         display_name = \"GitHub Enterprise\"\nscopes = \"repo, read:org\"\n\
         [providers.github.api_headers]\nx-extra = \"1\"\n\
         [providers.zendesk]\nclient_id = \"z\"\nclient_secret = \"y\"\n\
         [providers.zendesk.params.subdomain]\ndefault = \"acme\"\n",
    );
    let gh = catalog.get("github").unwrap();
    assert_eq!(gh.display_name(), "GitHub Enterprise");
    assert_eq!(gh.default_scopes(), ["repo", "read:org"]);
    // Merged key by key: the shipped headers stay.
    let headers: Vec<_> = gh
        .quirks
        .api_headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(headers, ["accept", "x-extra", "x-github-api-version"]);
    let zd = catalog.get("zendesk").unwrap();
    assert_eq!(
        zd.api_base_url().unwrap().as_str(),
        "https://acme.zendesk.com/api/v2/"
    );
    assert_eq!(
        zd.authorize_url.as_ref().unwrap().as_str(),
        "https://acme.zendesk.com/oauth/authorizations/new"
    );
}

#[test]
fn unknown_fields_and_bad_parameters_are_refused() {
    let e = error_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\nscope_sep = \",\"\n",
    );
    assert!(e.contains("unknown field `scope_sep`"), "{e}");
    let e = error_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         [providers.github.params.x]\nlabels = \"y\"\n",
    );
    assert!(
        e.starts_with("setting `providers.github.params.x.labels`:"),
        "{e}"
    );
    // A value that does not match its pattern never reaches a template.
    let e = error_of(
        "[providers.zendesk]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         [providers.zendesk.params.subdomain]\ndefault = \"evil.example/x\"\n",
    );
    assert!(e.contains("does not match its pattern"), "{e}");
    assert!(!e.contains("evil.example"), "{e}");
    // Without a default, the subdomain is asked on the consent page.
    let zendesk = catalog_of("[providers.zendesk]\nclient_id = \"a\"\nclient_secret = \"b\"\n");
    assert_eq!(zendesk.get("zendesk").unwrap().api_base_url(), None);
    // A self-hosted base only on a host the operator allowed.
    let e = error_of(
        "[providers.gitlab]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         [providers.gitlab.params.instance]\ndefault = \"https://gitlab.evil.example\"\n",
    );
    assert!(e.contains("did not allow"), "{e}");
    let catalog = catalog_of(
        "[providers.gitlab]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         [providers.gitlab.params.instance]\ndefault = \"https://git.example.org\"\n\
         allowed_hosts = [\"git.example.org\"]\n",
    );
    let gl = catalog.get("gitlab").unwrap();
    assert_eq!(
        gl.token_url.as_ref().unwrap().as_str(),
        "https://git.example.org/oauth/token"
    );
    // Learned parameters are filled in per connection.
    let sf = catalog_of("[providers.salesforce]\nclient_id = \"a\"\nclient_secret = \"b\"\n");
    assert_eq!(sf.get("salesforce").unwrap().api_base_url(), None);
    // An API-key entry needs nothing but its name, and keeps its checks.
    let stripe = catalog_of("[providers.stripe]\n");
    assert_eq!(stripe.get("stripe").unwrap().credential_kind(), "api_key");
    let e = error_of("[providers.datadog.params.site]\ndefault = \"evil.example\"\n");
    assert!(e.contains("does not match its pattern"), "{e}");
    let e = error_of(
        "[providers.keys]\nkind = \"api_key\"\ndisplay_name = \"Keys\"\n\
         docs_url = \"https://k.example/docs\"\nkey_url = \"https://k.example/keys\"\n\
         instructions = \"Paste it.\"\nuserinfo_url = \"https://k.example/me\"\n\
         api_base_url = \"https://k.example/\"\naccount_id_from = \"credential\"\n",
    );
    assert_eq!(
        e,
        "setting `providers.keys.fields`: an api_key entry names its key field"
    );
}

/// As the other settings' errors: the setting, and the variable that
/// sets it (for a secret, the `…_FILE` one first, and where compose
/// takes it from).
#[test]
fn missing_secret_names_the_setting() {
    let e = error_of("[providers.github]\nclient_id = \"a\"\n");
    assert_eq!(
        e,
        "setting `providers.github.client_secret`: required by token_auth_method \
         client_secret_post (set MCP_CONNECT_PROVIDERS__GITHUB__CLIENT_SECRET_FILE to a file \
         holding it, or MCP_CONNECT_PROVIDERS__GITHUB__CLIENT_SECRET; with Docker Compose, a \
         MCP_CONNECT_PROVIDERS__GITHUB__CLIENT_SECRET_FILE line in deploy/providers.env)"
    );
    let e = error_of("[providers.github]\nclient_secret = \"a\"\n");
    assert_eq!(
        e,
        "setting `providers.github.client_id`: required by oauth2 entries (set it in the file \
         or as MCP_CONNECT_PROVIDERS__GITHUB__CLIENT_ID)"
    );
}

#[test]
fn custom_entries_need_their_urls() {
    let e = error_of("[providers.acme]\nclient_id = \"a\"\nclient_secret = \"b\"\n");
    assert_eq!(
        e,
        "setting `providers.acme.authorize_url`: required by the custom entry"
    );
    let e = error_of(
        "[providers.acme]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         authorize_url = \"https://a.example/auth\"\ntoken_url = \"https://a.example/token\"\n\
         userinfo_url = \"https://a.example/me\"\n",
    );
    assert!(
        e.starts_with("setting `providers.acme.api_base_url`:"),
        "{e}"
    );
}

#[test]
fn bad_values_are_named() {
    let e = error_of("[providers.x]\npreset = \"gitlab2\"\nclient_id = \"a\"\n");
    assert!(
        e.starts_with("setting `providers.x.preset`: unknown catalog entry"),
        "{e}"
    );
    let e = error_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         token_url = \"http://github.example/token\"\n",
    );
    assert!(
        e.starts_with("setting `providers.github.token_url`:"),
        "{e}"
    );
    let e = error_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         allowed_methods = [\"GET\", \"TRACE\"]\n",
    );
    assert!(
        e.starts_with("setting `providers.github.allowed_methods`:"),
        "{e}"
    );
    let e = error_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         token_auth_method = \"private_key_jwt\"\n",
    );
    assert!(
        e.starts_with("setting `providers.github.token_auth_method`:"),
        "{e}"
    );
    let e = error_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         account_id_pointer = \"user.id\"\n",
    );
    assert!(
        e.starts_with("setting `providers.github.account_id_pointer`:"),
        "{e}"
    );
}

#[test]
fn an_iss_is_required_only_with_an_issuer_to_compare_it_with() {
    let e = error_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\nrequire_iss = true\n",
    );
    assert!(
        e.starts_with("setting `providers.github.require_iss`: needs `issuer`"),
        "{e}"
    );
    let c = catalog_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\nrequire_iss = true\n\
         issuer = \"https://github.com/login/oauth\"\n",
    );
    let github = c.get("github").unwrap();
    assert!(github.requires_iss());
    assert_eq!(github.issuer(), Some("https://github.com/login/oauth"));
}

#[test]
fn public_clients_need_no_secret_and_bases_get_a_slash() {
    let settings = settings_with(
        "https://connect.example.com",
        "[providers.acme]\nclient_id = \"a\"\ntoken_auth_method = \"none\"\n\
         authorize_url = \"https://a.example/auth\"\ntoken_url = \"https://a.example/token\"\n\
         userinfo_url = \"https://a.example/me\"\napi_base_url = \"https://api.a.example/v1\"\n\
         allowed_methods = [\"get\", \"post\"]\n",
    );
    let catalog = ProviderCatalog::from_settings(&settings).unwrap();
    let acme = catalog.get("acme").unwrap();
    assert_eq!(
        acme.api_base_url().unwrap().as_str(),
        "https://api.a.example/v1/"
    );
    assert_eq!(acme.allowed_methods, vec!["GET", "POST"]);
    assert_eq!(acme.display_name(), "acme");
    assert_eq!(acme.preset(), "custom");
    assert_eq!(acme.account_label_pointers[0], "/preferred_username");
}

/// Only an entry that says `refresh = "expiring"` is taken at its word
/// that refresh tokens never rotate: one that says nothing is refreshed
/// the same way, but may rotate them.
#[test]
fn refresh_tokens_are_kept_only_where_the_entry_says_so() {
    let custom = "[providers.acme]\nclient_id = \"a\"\ntoken_auth_method = \"none\"\n\
                  authorize_url = \"https://a.example/auth\"\ntoken_url = \"https://a.example/token\"\n\
                  userinfo_url = \"https://a.example/me\"\napi_base_url = \"https://api.a.example/v1\"\n";
    let said = format!("{custom}refresh = \"expiring\"\n");
    let acme = catalog_of(custom);
    let acme = acme.get("acme").unwrap();
    assert_eq!(acme.refresh_behaviour(), "expiring");
    assert!(!acme.keeps_its_refresh_token());
    assert!(
        catalog_of(&said)
            .get("acme")
            .unwrap()
            .keeps_its_refresh_token()
    );
    let shipped = catalog_of(
        "[providers.dropbox]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         [providers.gitlab]\nclient_id = \"a\"\nclient_secret = \"b\"\n",
    );
    assert!(shipped.get("dropbox").unwrap().keeps_its_refresh_token());
    assert!(
        !shipped.get("gitlab").unwrap().keeps_its_refresh_token(),
        "rotating"
    );
}

/// Every file in `catalog/` is compiled in, and nothing else is.
#[test]
fn the_shipped_list_is_the_catalog_directory() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/catalog");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|f| f.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let listed: Vec<String> = shipped::names()
        .iter()
        .map(|n| format!("{n}.toml"))
        .collect();
    assert_eq!(files, listed);
}

/// Each shipped entry parses with no unknown field, is whole for its kind,
/// and resolves every template with its declared parameters to an https
/// URL (the demo's, on this server's own base URL, to loopback).
#[test]
fn every_shipped_entry_is_valid() {
    assert!(shipped::names().len() >= 30);
    for name in shipped::names() {
        let table = shipped::table(name).unwrap_or_else(|| panic!("{name}: not TOML"));
        let entry = entry::parse(table).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        check::entry(&entry).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let lookups = entry.params.iter().flatten().map(|(_, p)| &p.lookup_url);
        for url in [
            &entry.authorize_url,
            &entry.token_url,
            &entry.refresh_url,
            &entry.revocation_url,
            &entry.userinfo_url,
            &entry.api_base_url,
        ]
        .into_iter()
        .chain(lookups)
        .flatten()
        {
            let https = url.starts_with("https://")
                || url.starts_with("{instance}")
                || url.starts_with("{instance_url}")
                || (name == "demo" && url.starts_with("{base_url}/dev/demo/"));
            assert!(https, "{name}: {url}");
        }
    }
}

#[test]
fn the_checks_refuse_broken_entries() {
    let base = shipped::table("zendesk").unwrap();
    let broken = |edit: &str| {
        let mut table = base.clone();
        entry::merge(&mut table, edit.parse().unwrap());
        check::entry(&entry::parse(table).unwrap()).unwrap_err()
    };
    assert_eq!(
        broken("token_url = \"https://{tenant}.example/t\"").0,
        "token_url"
    );
    assert_eq!(
        broken("token_url = \"http://{subdomain}.example/t\"").0,
        "token_url"
    );
    assert_eq!(
        broken("account_id_pointer = \"user.id\"").0,
        "account_id_pointer"
    );
    // A field the exchange sets itself cannot be set (or replaced) here.
    for field in ["grant_type", "redirect_uri", "client_secret"] {
        assert_eq!(
            broken(&format!("token_params = {{ {field} = \"x\" }}")).0,
            "token_params"
        );
    }
    assert_eq!(
        broken("[params.subdomain]\nexample = \"a.b/c\"").0,
        "params.subdomain"
    );
    assert_eq!(broken("docs_url = \"http://docs.example\"").0, "docs_url");
    assert_eq!(
        broken("[fields.key]\nlabel = \"k\"\npattern = \"x\"\nsend = \"bearer\"").0,
        "fields.key"
    );
    let twilio = shipped::table("twilio").unwrap();
    let mut table = twilio.clone();
    entry::merge(
        &mut table,
        "[fields.auth_token]\nsend = \"bearer\"".parse().unwrap(),
    );
    let e = check::entry(&entry::parse(table).unwrap()).unwrap_err();
    assert_eq!(e.0, "fields");
}

#[test]
fn a_pattern_that_does_not_compile_stops_the_reading_of_its_entry() {
    for (edit, path) in [
        (
            "[params.subdomain]\npattern = \"[\"",
            "params.subdomain.pattern",
        ),
        (
            "[fields.key]\nlabel = \"k\"\npattern = \"(\"\nsend = \"bearer\"",
            "fields.key.pattern",
        ),
    ] {
        let mut table = shipped::table("zendesk").unwrap();
        entry::merge(&mut table, edit.parse().unwrap());
        let (at, message) = entry::parse(table).unwrap_err();
        assert_eq!(at, path);
        assert!(message.contains("invalid pattern"), "{message}");
    }
}

/// The README's provider table is the catalog's.
#[test]
fn the_readme_lists_the_catalog() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    const START: &str = "<!-- catalog:start -->\n";
    const END: &str = "<!-- catalog:end -->";
    let (before, rest) = readme
        .split_once(START)
        .expect("README has the catalog markers");
    let (_, after) = rest.split_once(END).expect("README has the end marker");
    let wanted = format!(
        "{before}{START}{}{END}{after}",
        crate::providers::catalog_markdown()
    );
    if std::env::var_os("UPDATE_README").is_some() {
        std::fs::write(path, &wanted).unwrap();
    }
    assert!(
        readme == wanted,
        "README.md's provider table differs from catalog/; regenerate it with \
         `UPDATE_README=1 cargo test --lib the_readme_lists_the_catalog`"
    );
}

#[test]
fn plain_http_provider_urls_are_refused_off_loopback_even_with_insecure_http() {
    let toml = "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
                token_url = \"http://github.example/token\"\n\
                revocation_url = \"http://github.example/revoke\"\n";
    let mut settings = settings_with("http://127.0.0.1:8080", toml);
    settings.insecure_http = true;
    let e = ProviderCatalog::from_settings(&settings)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("setting `providers.github.token_url`:"),
        "{e}"
    );
    let loopback = toml.replace("github.example", "127.0.0.1:9");
    let settings = settings_with("http://127.0.0.1:8080", &loopback);
    assert!(ProviderCatalog::from_settings(&settings).is_ok());
}

/// A client secret goes to the token, refresh and revocation URLs: a user
/// must not be able to pick, among several allowed hosts, where it goes.
#[test]
fn a_secret_is_never_sent_to_a_host_a_user_picks_among_several() {
    let two_hosts = "[providers.gitlab]\nclient_id = \"g\"\nclient_secret = \"s\"\n\
                     params.instance.allowed_hosts = [\"gitlab.com\", \"git.example.org\"]\n";
    let e = error_of(two_hosts);
    assert!(
        e.starts_with("setting `providers.gitlab.params.instance.allowed_hosts`:"),
        "{e}"
    );
    assert!(e.contains("a provider per instance"), "{e}");
    // One host per provider, one provider per instance.
    catalog_of(
        "[providers.gitlab]\nclient_id = \"g\"\nclient_secret = \"s\"\n\
         [providers.work_gitlab]\npreset = \"gitlab\"\nclient_id = \"w\"\nclient_secret = \"t\"\n\
         params.instance.allowed_hosts = [\"git.example.org\"]\n\
         params.instance.default = \"https://git.example.org\"\n",
    );
    // A public client (no secret) may serve several.
    catalog_of(
        "[providers.gitlab]\nclient_id = \"g\"\ntoken_auth_method = \"none\"\n\
         params.instance.allowed_hosts = [\"gitlab.com\", \"git.example.org\"]\n",
    );
}

/// GitHub Enterprise Server: the token endpoint moved to the operator's
/// host, the revocation left on api.github.com, would send the client
/// secret there on every disconnect.
#[test]
fn a_token_endpoint_moved_takes_the_secrets_other_endpoints_with_it() {
    let ghes = "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
                authorize_url = \"https://git.example.com/login/oauth/authorize\"\n\
                token_url = \"https://git.example.com/login/oauth/access_token\"\n\
                userinfo_url = \"https://git.example.com/api/v3/user\"\n\
                api_base_url = \"https://git.example.com/api/v3/\"\n";
    let err = error_of(ghes);
    assert!(err.contains("revocation_url"), "{err}");
    assert!(err.contains("api.github.com"), "{err}");
    let with_revocation = format!(
        "{ghes}revocation_url = \"https://git.example.com/api/v3/applications/{{client_id}}/grant\"\n"
    );
    let gh = catalog_of(&with_revocation);
    assert!(gh.get("github").unwrap().revokes(TokenHint::AccessToken));
    // Google: the refresh goes where the token endpoint is, whatever the
    // operator moved it to (no refresh_url of its own); its revocation
    // stays at oauth2.googleapis.com unless moved too.
    let google = "[providers.google]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
                  token_url = \"https://proxy.example.com/token\"\n";
    assert!(error_of(google).contains("revocation_url"));
    // Moved on the entry's own host (GitHub's token endpoint is on
    // github.com, its revocation on api.github.com): nothing leaves it.
    catalog_of(
        "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         token_url = \"https://github.com/login/oauth/access_token?v=2\"\n",
    );
}

#[test]
fn a_refused_value_is_not_repeated_in_the_error() {
    for edit in [
        "api_headers = \"X-Api-Key: sk_live_0123456789\"",
        "authorize_params = \"sk_live_0123456789\"",
        "api_timeout_secs = [\"sk_live_0123456789\"]",
    ] {
        let mut table = shipped::table("zendesk").unwrap();
        entry::merge(&mut table, edit.parse().unwrap());
        let (at, message) = entry::parse(table).unwrap_err();
        assert!(!at.is_empty(), "{edit}: {message}");
        assert!(!message.contains("sk_live"), "{edit}: {message}");
        assert!(message.contains("expected"), "{edit}: {message}");
    }
}

/// Postmark's `GET server` lists every API token of the server beside its
/// name: the identity check reads it, `api_request` may not, however the
/// path is spelled.
#[test]
fn postmarks_server_tokens_are_not_for_the_model() {
    use crate::providers::guard;
    let catalog = catalog_of("[providers.postmark]\n");
    let p = catalog.get("postmark").unwrap();
    let base = url::Url::parse("https://api.postmarkapp.com/").unwrap();
    for path in ["server", "Server", "server/", "server/x"] {
        let url = guard::resolve(&base, path).unwrap();
        assert!(
            guard::not_under_grant_paths(&url, &base, &p.grant_paths).is_err(),
            "{path}"
        );
    }
    for path in ["servers", "messages/outbound"] {
        let url = guard::resolve(&base, path).unwrap();
        assert!(guard::not_under_grant_paths(&url, &base, &p.grant_paths).is_ok());
    }
}

/// Microsoft Graph's sign-out of every session ends every refresh token
/// of the user, this connection's too, and `$batch` carries requests no
/// check here sees: refused for `api_request`, however spelled (Graph's
/// paths are case-insensitive), even where an operator allows POST.
#[test]
fn microsofts_sign_out_everywhere_is_not_for_the_model() {
    use crate::providers::guard;
    let catalog = catalog_of(
        "[providers.microsoft]\nclient_id = \"c\"\nclient_secret = \"s\"\nallowed_methods = [\"GET\", \"POST\"]\n",
    );
    let p = catalog.get("microsoft").unwrap();
    let base = url::Url::parse("https://graph.microsoft.com/v1.0/").unwrap();
    for path in [
        "me/revokeSignInSessions",
        "ME/REVOKESIGNINSESSIONS",
        "me/microsoft.graph.revokeSignInSessions",
        "me/invalidateAllRefreshTokens",
        "$batch",
        "%24batch",
    ] {
        let url = guard::resolve(&base, path).unwrap();
        assert!(
            guard::not_under_grant_paths(&url, &base, &p.grant_paths).is_err(),
            "{path}"
        );
    }
    let url = guard::resolve(&base, "me/messages").unwrap();
    assert!(guard::not_under_grant_paths(&url, &base, &p.grant_paths).is_ok());
}
