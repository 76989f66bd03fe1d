//! The application error for browser-facing and JSON routes, mapped once to
//! HTTP. 5xx bodies are generic; the cause chain goes to the log.

use actix_web::{HttpResponse, ResponseError, http::StatusCode};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for AppError {
    fn from(e: sqlx::Error) -> Self {
        AppError::Internal(anyhow::Error::new(e).context("database"))
    }
}

impl ResponseError for AppError {
    fn status_code(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::Internal(e) if crate::db::faults::is_transient_chain(e) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let message = match self {
            AppError::Internal(e) if crate::db::faults::is_transient_chain(e) => {
                tracing::warn!(error = %format!("{e:#}"), "database unavailable");
                return HttpResponse::build(self.status_code())
                    .insert_header(("Cache-Control", "no-store"))
                    .insert_header(("Retry-After", "5"))
                    .json(serde_json::json!({ "error": "The database is unavailable right now. Please try again in a few seconds." }));
            }
            AppError::Internal(e) => {
                tracing::error!(error = %format!("{e:#}"), "internal error");
                "Something went wrong on our side. Please try again in a moment.".to_owned()
            }
            other => other.to_string(),
        };
        HttpResponse::build(self.status_code())
            .insert_header(("Cache-Control", "no-store"))
            .json(serde_json::json!({ "error": message }))
    }
}
