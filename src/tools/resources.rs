//! Resources: the caller's connections (`connections://mine`), and one
//! template, `connection://{provider}/profile`, whose read needs the account
//! and so goes through the same connect flow as the tools.

use crate::connect::errors::RequestError;
use rmcp::{
    ErrorData, RoleServer,
    model::{
        CacheScope, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
        ResourceContents, ResourceTemplate,
    },
    service::RequestContext,
};

use super::{client_kind, connections_list::ConnectionsList, internal, result::Outcome};
use crate::{
    auth::Principal,
    connect::{Access, ConnectionService, Need, state::Binding},
};

pub const CONNECTIONS_URI: &str = "connections://mine";
pub const PROFILE_TEMPLATE: &str = "connection://{provider}/profile";

pub fn resources() -> Vec<Resource> {
    vec![
        Resource::new(CONNECTIONS_URI, "connections")
            .with_title("Your connected accounts")
            .with_description(
                "The third-party accounts you have connected: provider, account, scopes, status.",
            )
            .with_mime_type("application/json"),
    ]
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(PROFILE_TEMPLATE, "connection-profile")
            .with_title("Your account at a provider")
            .with_description(
                "Your profile at a provider (e.g. connection://github/profile), as the provider reports it. \
                 Asks you to connect the account first if needed.",
            )
            .with_mime_type("application/json"),
    ]
}

/// `connection://{provider}/profile` → the provider, if the URI is one.
fn profile_provider(uri: &str) -> Option<&str> {
    let provider = uri
        .strip_prefix("connection://")?
        .strip_suffix("/profile")?;
    crate::config::is_valid_name(provider).then_some(provider)
}

/// Reads a resource for `principal`; `audience` is this server's MCP
/// resource identifier (bound into a round's `requestState`).
pub async fn read(
    service: &ConnectionService,
    audience: &str,
    principal: &Principal,
    request: &ReadResourceRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<ReadResourceResponse, ErrorData> {
    if request.uri == CONNECTIONS_URI {
        let rows = service
            .list_for_client(principal.user(), &principal.client_id)
            .await
            .map_err(internal)?;
        // The same JSON as the connections_list tool's result.
        let text = serde_json::to_string(&ConnectionsList::of(&rows, service.providers()))
            .map_err(internal)?;
        return Ok(ReadResourceResponse::Complete(
            ReadResourceResult::new(vec![
                ResourceContents::text(text, CONNECTIONS_URI).with_mime_type("application/json"),
            ])
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private),
        ));
    }
    let Some(provider) = profile_provider(&request.uri) else {
        return Err(RequestError::ResourceNotFound {
            uri: request.uri.clone(),
        }
        .into());
    };
    let access = service
        .require(Need {
            principal,
            provider,
            scopes: &[],
            account: None,
            add_account: false,
            binding: Binding {
                audience,
                user: principal.user(),
                client_id: &principal.client_id,
                method: "resources/read",
                target: &request.uri,
                arguments: None,
            },
            input_responses: request.input_responses.as_ref(),
            request_state: request.request_state.as_deref(),
            client: client_kind(context),
            cancel: &context.ct,
        })
        .await?;
    let (token, provider) = match access {
        Access::Ready { token, provider } => (token, provider),
        Access::InputRequired(result) => return Ok(ReadResourceResponse::InputRequired(result)),
        Access::Declined { provider_name } => {
            return Err(RequestError::Declined {
                provider: provider_name,
            }
            .into());
        }
        Access::ApprovalDenied { provider_name } => {
            return Err(RequestError::ApprovalDenied {
                provider: provider_name,
            }
            .into());
        }
        Access::Cancelled { provider_name } => {
            return Err(RequestError::Cancelled {
                provider: provider_name,
            }
            .into());
        }
        Access::AuthorizationRefused {
            provider_name,
            code,
            refusal,
        } => {
            let message = refusal.for_model(&provider_name, &code);
            return Err(RequestError::AuthorizationRefused { message }.into());
        }
        Access::ProviderUnavailable { provider_name } => {
            return Err(RequestError::ProviderUnavailable {
                provider: provider_name,
            }
            .into());
        }
        Access::RefreshRefused {
            provider_name,
            refusal,
        } => {
            return Err(RequestError::RefreshRefused {
                message: super::refresh_refused(&provider_name, &refusal),
            }
            .into());
        }
        // The profile names no account: with several, the user is asked;
        // it never asks for another account.
        Access::AccountAmbiguous { message } | Access::AccountLimitReached { message } => {
            return Err(RequestError::InvalidArguments(message).into());
        }
    };
    let (token, asked) = super::ask_account(service, provider, token).await;
    let account = match asked {
        Ok(account) => account,
        Err(e) => {
            tracing::warn!(provider = %provider.name(), error = %e, "profile resource: provider call failed");
            if matches!(e, crate::providers::ProviderError::Denied(_)) {
                // As for whoami: the provider no longer takes the token, so
                // the next read asks the user to connect again.
                service.token_rejected(&token).await.map_err(internal)?;
            }
            return Err(RequestError::ProviderFailed {
                provider: provider.display_name().to_owned(),
            }
            .into());
        }
    };
    // The same JSON as the whoami tool's result.
    let text = serde_json::to_string(&Outcome::ok(provider.name(), &account.label, &account.id))
        .map_err(internal)?;
    Ok(ReadResourceResponse::Complete(
        ReadResourceResult::new(vec![
            ResourceContents::text(text, request.uri.clone()).with_mime_type("application/json"),
        ])
        .with_ttl_ms(0)
        .with_cache_scope(CacheScope::Private),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_uris_parse_strictly() {
        assert_eq!(
            profile_provider("connection://github/profile"),
            Some("github")
        );
        for bad in [
            "connection:///profile",
            "connection://GitHub/profile",
            "connection://a/b/profile",
            "connection://x/profile/",
        ] {
            assert_eq!(profile_provider(bad), None, "{bad}");
        }
    }
}
