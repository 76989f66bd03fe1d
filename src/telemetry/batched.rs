//! A log writer for serving processes: request handlers queue their lines;
//! one thread writes whatever has gathered, at most every
//! [`GATHER`], in one system call. Under load that is hundreds of lines per
//! write instead of one write (and often one thread wake-up) per line.
//! Nothing is dropped: the queue is bounded, and when it is full (stderr
//! blocked) handlers wait, as they would on a direct write.

use std::{
    io::Write,
    sync::mpsc::{Receiver, SyncSender, sync_channel},
    thread::JoinHandle,
    time::Duration,
};

use tracing_subscriber::fmt::MakeWriter;

/// How long the writer lets lines gather after the first one arrives.
const GATHER: Duration = Duration::from_millis(10);
/// Lines queued at most before handlers wait for the writer.
const QUEUE: usize = 64 * 1024;

enum Message {
    Line(Vec<u8>),
    /// Write out everything before this, then say so.
    Flush(SyncSender<()>),
}

/// Hands each formatted line to the writer thread.
#[derive(Clone)]
pub struct BatchedWriter(SyncSender<Message>);

/// Dropping it writes out what is queued (waiting up to a second).
pub struct WriterGuard {
    sender: SyncSender<Message>,
    _thread: JoinHandle<()>,
}

/// A writer for `out`, and the guard that flushes it at the end.
pub fn spawn<W: Write + Send + 'static>(out: W) -> std::io::Result<(BatchedWriter, WriterGuard)> {
    let (sender, receiver) = sync_channel(QUEUE);
    let thread = std::thread::Builder::new()
        .name("mcp-connect-log".into())
        .spawn(move || write_batches(&receiver, out, GATHER))?;
    Ok((
        BatchedWriter(sender.clone()),
        WriterGuard {
            sender,
            _thread: thread,
        },
    ))
}

fn write_batches<W: Write>(messages: &Receiver<Message>, mut out: W, gather: Duration) {
    let mut batch = Vec::with_capacity(64 * 1024);
    let mut flushed = Vec::new();
    // Blocks while idle; ends when every sender is gone.
    while let Ok(first) = messages.recv() {
        if matches!(first, Message::Line(_)) {
            std::thread::sleep(gather);
        }
        for message in std::iter::once(first).chain(messages.try_iter()) {
            match message {
                Message::Line(line) => batch.extend_from_slice(&line),
                Message::Flush(ack) => flushed.push(ack),
            }
        }
        // Nowhere to report a failing stderr: the lines are lost either way.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
        for ack in flushed.drain(..) {
            let _ = ack.send(());
        }
    }
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        let (ack, done) = sync_channel(1);
        if self.sender.send(Message::Flush(ack)).is_ok() {
            let _ = done.recv_timeout(Duration::from_secs(1));
        }
    }
}

impl BatchedWriter {
    /// Queues one whole line, as formatted (ending in a newline).
    pub fn send_line(&self, line: Vec<u8>) {
        // The writer thread lives as long as the process serves; once it is
        // gone there is nowhere left to write.
        let _ = self.0.send(Message::Line(line));
    }
}

/// One formatted line (tracing's formatter writes each event whole).
pub struct Line(SyncSender<Message>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.send(Message::Line(buf.to_vec())).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "log writer stopped")
        })?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BatchedWriter {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut inner = self.0.lock().unwrap_or_else(|p| p.into_inner());
            inner.0.extend_from_slice(buf);
            inner.1 += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_arrives_in_order_in_few_writes() {
        let sink = Sink::default();
        let (sender, receiver) = sync_channel(QUEUE);
        let out = sink.clone();
        // A gathering window long enough that a loaded machine's pauses in
        // this thread do not split the lines into many writes.
        let thread =
            std::thread::spawn(move || write_batches(&receiver, out, Duration::from_millis(500)));
        let writer = BatchedWriter(sender);
        for i in 0..1000 {
            writer
                .make_writer()
                .write_all(format!("line {i}\n").as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        drop(writer);
        thread.join().unwrap_or_else(|_| panic!("writer thread"));
        let (bytes, writes) = sink.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let text = String::from_utf8(bytes).unwrap_or_default();
        let expected: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        assert_eq!(text, expected);
        assert!(writes < 10, "{writes} writes for 1000 lines");
    }

    #[test]
    fn the_guard_writes_out_what_is_queued() {
        let sink = Sink::default();
        let (writer, guard) = spawn(sink.clone()).unwrap_or_else(|e| panic!("{e}"));
        writer
            .make_writer()
            .write_all(b"last words\n")
            .unwrap_or_else(|e| panic!("{e}"));
        drop(writer);
        drop(guard);
        let (bytes, _) = sink.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(bytes, b"last words\n");
    }
}
