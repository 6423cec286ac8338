import Glibc

/// Writes all of `bytes` to `descriptor`, blocking as the descriptor does; false on an error (EPIPE: the
/// reader is gone). stdout and stderr share it.
func writeFully(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            if errno == EAGAIN {
                // A descriptor someone else made non-blocking: wait for room rather than spin.
                var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                _ = poll(&ready, 1, 100)
                continue
            }
            return false
        }
        offset += written
    }
    return true
}
