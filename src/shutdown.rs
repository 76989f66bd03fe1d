//! The signals that stop the server: SIGTERM (container stop, systemd) and
//! Ctrl-C. The first drains (requests under way get the drain's time to
//! finish); a second stops at once, for whoever cannot wait.

/// Resolves on the first SIGTERM or Ctrl-C.
pub async fn signalled() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// After the first signal: waiting requests are answered at once
/// (`begin_shutdown`) and the server `handle` serves drains. Resolves on a
/// second signal during the drain: the caller then stops without waiting
/// for the requests under way (it returns instead of awaiting the server).
pub async fn drain_until_second_signal(
    handle: actix_web::dev::ServerHandle,
    begin_shutdown: impl FnOnce(),
) {
    signalled().await;
    tracing::info!(
        "shutting down: answering waiting requests, then draining (a second signal stops at once)"
    );
    begin_shutdown();
    // The command is sent now; the server's own future ends with the drain.
    drop(handle.stop(true));
    signalled().await;
    tracing::warn!("second stop signal: stopping without waiting for the requests under way");
}
