import Foundation
import HammockCore
import HammockJSON

/// Writes control lines on the engine's stdin, in the order they are handed over.
///
/// On a serial dispatch queue of its own, not in the actor: a write blocks while the pipe is full (the
/// engine stops reading stdin while 1,024 commands wait), and blocking one of the few threads of Swift's
/// concurrency pool would stall every task of the app.
final class ControlWriter: Sendable {
    private let descriptor: Int32
    private let queue = DispatchQueue(label: "hammock.control")

    /// Takes ownership of `descriptor`.
    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Writes `bytes` whole; calls `failed` with the reason if it cannot (except when the engine is gone: its
    /// end says more).
    func write(_ bytes: [UInt8], failed: @escaping @Sendable (String) -> Void) {
        queue.async { [descriptor] in
            var written = 0
            while written < bytes.count {
                let count = bytes.withUnsafeBytes {
                    Glibc.write(descriptor, $0.baseAddress! + written, bytes.count - written)
                }
                if count < 0 {
                    if errno == EINTR { continue }
                    // The engine closed its stdin by exiting: its end fails the call, with the stderr tail.
                    if errno == EPIPE { return }
                    failed("could not write a control line to hammock: \(String(cString: strerror(errno)))")
                    return
                }
                written += count
            }
        }
    }

    /// Closes the pipe after every write handed over before. `EngineLines` calls it once, at the end, and
    /// hands over no write after it.
    func close() {
        queue.async { [descriptor] in _ = Glibc.close(descriptor) }
    }
}

extension EngineLines {
    /// Sends `command` with a fresh id and returns when the engine acknowledges it. Throws
    /// `HammockError.refused` with the engine's message when it cannot carry it out, and the engine's end
    /// (`engineExited`, `stopped`) when it ends first.
    func perform(_ command: ControlCommand) async throws {
        if let end { throw end ?? HammockError.stopped }
        guard case .object(var object) = try JSONValueEncoder().encode(command) else { return }
        let id = nextControlID
        nextControlID += 1
        object["id"] = .number(JSONNumber(id))
        var line = JSONValue.object(object).jsonBytes
        line.append(UInt8(ascii: "\n"))
        try await withCheckedThrowingContinuation { (call: CheckedContinuation<Void, any Error>) in
            pending[id] = call
            writer.write(line) { message in
                Task { await self.writeFailed(id, message) }
            }
        }
    }

    private func writeFailed(_ id: Int, _ message: String) {
        pending.removeValue(forKey: id)?.resume(throwing: HammockError.io(message))
    }
}
