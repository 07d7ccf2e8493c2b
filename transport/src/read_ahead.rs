//! A read-ahead buffer under a WebSocket that exists only while the peer streams.
//!
//! tungstenite reads at most its configured read buffer per call (2 KiB on the
//! gateway, [`crate::config`]), so a 1 MiB transfer chunk would cost 512 `recvfrom`
//! calls. A larger read buffer would stay resident on every idle connection
//! (tungstenite zero-fills it before each read). Nodes and clients, one connection
//! per process, read 128 KiB at a time instead: a read that large passes through. [`ReadAhead`] keeps nothing while a connection carries small frames: reads
//! go straight to the socket. A read that fills the caller's whole buffer means more
//! is waiting, so the next small reads are served from one [`READ_AHEAD_BYTES`] read
//! of the socket, until the socket has no more than the caller asked for (or nothing:
//! the reader waits again), when the buffer is handed out and freed. It costs one
//! copy of the bytes in memory and saves up to 31 of every 32 system calls.
//!
//! Whether a connection may read ahead at all is a [`Switch`] that others hold too:
//! the gateway turns it on for a node after its handshake, and for an agent only while
//! that agent has an upload open.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One read of the socket while the peer streams.
pub const READ_AHEAD_BYTES: usize = 64 * 1024;

/// Whether a connection reads ahead; cheap to clone, so the side that knows when a
/// peer streams can turn it on and off while the connection's reader runs.
#[derive(Debug, Clone, Default)]
pub struct Switch(Arc<AtomicBool>);

impl Switch {
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed);
    }

    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A stream whose small reads are served from one larger read while the peer streams.
#[derive(Debug)]
pub struct ReadAhead<S> {
    inner: S,
    /// The read-ahead buffer while streaming; `None` while the connection is quiet.
    ahead: Option<Box<[u8]>>,
    /// `ahead[start..end]` is read from the socket and not yet handed out.
    start: usize,
    end: usize,
    /// The last direct read filled the caller's buffer: read ahead next time.
    streaming: bool,
    /// Off: every read goes straight to the stream (a connection whose peer is not
    /// trusted to stream, or not yet known).
    enabled: Switch,
}

impl<S> ReadAhead<S> {
    pub fn new(inner: S) -> Self {
        ReadAhead {
            inner,
            ahead: None,
            start: 0,
            end: 0,
            streaming: false,
            enabled: Switch(Arc::new(AtomicBool::new(true))),
        }
    }

    /// The same, reading ahead only once [`ReadAhead::set_enabled`] says so.
    pub fn disabled(inner: S) -> Self {
        ReadAhead {
            enabled: Switch::default(),
            ..ReadAhead::new(inner)
        }
    }

    /// Turns reading ahead on or off (off: what is already read ahead is still served
    /// first, then reads go straight to the stream).
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled.set(on);
        if !on {
            self.streaming = false;
        }
    }

    /// The switch that turns reading ahead on and off from elsewhere (a reader that
    /// finds it off reads straight again from its next read of the socket).
    pub fn switch(&self) -> Switch {
        self.enabled.clone()
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Whether a read-ahead buffer is held now (for tests).
    pub fn holds_buffer(&self) -> bool {
        self.ahead.is_some()
    }

    /// Hands out what is buffered; frees the buffer once it is empty and the socket
    /// had no more than a caller asks for.
    fn serve(&mut self, out: &mut ReadBuf<'_>) {
        if let Some(ahead) = &self.ahead {
            let n = out.remaining().min(self.end - self.start);
            out.put_slice(&ahead[self.start..self.start + n]);
            self.start += n;
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if !self.streaming {
                self.ahead = None;
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ReadAhead<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.start < this.end {
            this.serve(out);
            return Poll::Ready(Ok(()));
        }
        let want = out.remaining();
        if !this.streaming || want >= READ_AHEAD_BYTES || !this.enabled.is_on() {
            if !this.enabled.is_on() {
                // Switched off while streaming: nothing more to keep.
                this.ahead = None;
            }
            let before = out.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, out))?;
            let got = out.filled().len() - before;
            this.streaming =
                this.enabled.is_on() && want > 0 && got == want && want < READ_AHEAD_BYTES;
            return Poll::Ready(Ok(()));
        }
        let ahead = this
            .ahead
            .get_or_insert_with(|| vec![0u8; READ_AHEAD_BYTES].into_boxed_slice());
        let mut buf = ReadBuf::new(ahead);
        match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                // The peer paused: nothing to keep while the reader waits.
                this.streaming = false;
                this.ahead = None;
                return Poll::Pending;
            }
        }
        let got = buf.filled().len();
        // No more than a direct read would have brought: the burst is over (or reading
        // ahead was switched off meanwhile).
        this.streaming = got > want && this.enabled.is_on();
        this.start = 0;
        this.end = got;
        this.serve(out);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ReadAhead<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Small reads of a large burst come out whole and in order, from a buffer that
    /// is freed once the burst is read.
    #[tokio::test]
    async fn a_burst_read_in_small_pieces_comes_out_whole_and_the_buffer_goes() {
        let (mut a, b) = tokio::io::duplex(1 << 20);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        a.write_all(&data).await.unwrap();
        let mut r = ReadAhead::new(b);
        let mut got = Vec::new();
        let mut piece = [0u8; 2048];
        let mut held = false;
        while got.len() < data.len() {
            let n = r.read(&mut piece).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&piece[..n]);
            held |= r.holds_buffer();
        }
        assert_eq!(got, data);
        assert!(held, "a burst is read ahead");
        // Quiet again: a small frame is read straight, nothing kept.
        a.write_all(b"small").await.unwrap();
        let n = r.read(&mut piece).await.unwrap();
        assert_eq!(&piece[..n], b"small");
        assert!(!r.holds_buffer(), "a quiet connection keeps no buffer");
        drop(a);
        assert_eq!(r.read(&mut piece).await.unwrap(), 0, "end of stream");
    }

    #[tokio::test]
    async fn small_frames_never_allocate_a_buffer() {
        let (mut a, b) = tokio::io::duplex(1 << 16);
        let mut r = ReadAhead::new(b);
        let mut piece = [0u8; 2048];
        for i in 0..50u8 {
            a.write_all(&[i; 100]).await.unwrap();
            let n = r.read(&mut piece).await.unwrap();
            assert_eq!(&piece[..n], &[i; 100][..]);
            assert!(!r.holds_buffer());
        }
    }

    /// Disabled (a gateway's agent connections): a burst is read straight, in the
    /// caller's pieces, and never buffered.
    #[tokio::test]
    async fn a_disabled_read_ahead_never_buffers() {
        let (mut a, b) = tokio::io::duplex(1 << 20);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 5 % 251) as u8).collect();
        a.write_all(&data).await.unwrap();
        let mut r = ReadAhead::disabled(b);
        let mut got = Vec::new();
        let mut piece = [0u8; 2048];
        while got.len() < data.len() {
            let n = r.read(&mut piece).await.unwrap();
            assert!(n > 0 && !r.holds_buffer());
            got.extend_from_slice(&piece[..n]);
        }
        assert_eq!(got, data);
        r.set_enabled(true);
        a.write_all(&data).await.unwrap();
        let mut held = false;
        got.clear();
        while got.len() < data.len() {
            let n = r.read(&mut piece).await.unwrap();
            got.extend_from_slice(&piece[..n]);
            held |= r.holds_buffer();
        }
        assert!(held, "enabled again, a burst is read ahead");
    }

    /// The switch held elsewhere (the gateway's transfers) turns reading ahead on for
    /// a burst and off again: the next burst is read straight, and nothing is kept.
    #[tokio::test]
    async fn a_shared_switch_turns_reading_ahead_on_and_off() {
        let (mut a, b) = tokio::io::duplex(1 << 20);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 3 % 251) as u8).collect();
        let mut r = ReadAhead::disabled(b);
        let switch = r.switch();
        /// Reads one burst in 2 KiB pieces: whether a buffer was held meanwhile.
        async fn burst(r: &mut ReadAhead<tokio::io::DuplexStream>) -> bool {
            let (mut got, mut held, mut piece) = (0usize, false, [0u8; 2048]);
            while got < 300_000 {
                got += r.read(&mut piece).await.unwrap();
                held |= r.holds_buffer();
            }
            held
        }
        switch.set(true);
        a.write_all(&data).await.unwrap();
        assert!(burst(&mut r).await, "switched on: read ahead");
        switch.set(false);
        a.write_all(&data).await.unwrap();
        assert!(!burst(&mut r).await, "switched off: read straight");
        assert!(!r.holds_buffer());
    }
}
