import Foundation
import HammockCore
import HammockJSON
import HammockSystem

/// Writes control lines on the engine's stdin, in the order they are handed over.
///
/// On a `BlockingExecutor` of its own (one thread, writes in order), not in the actor: a write blocks while
/// the pipe is full (the engine stops reading stdin while 1,024 commands wait), and blocking one of the few
/// threads of Swift's concurrency pool would stall every task of the app.
final class ControlWriter: Sendable {
    private let descriptor: Int32
    private let queue = BlockingExecutor(name: "hammock.control")

    /// Takes ownership of `descriptor`.
    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Writes `bytes` whole; calls `failed` with the reason if it cannot (except when the engine is gone: its
    /// end says more).
    func write(_ bytes: [UInt8], failed: @escaping @Sendable (String) -> Void) {
        queue.submit { [descriptor] in
            do throws(SystemCallError) {
                try Descriptor.writeAllWithoutBrokenPipeSignal(bytes, to: descriptor)
            } catch {
                // The engine closed its stdin by exiting: its end fails the call, with the stderr tail.
                if error.code == EPIPE { return }
                failed("could not write a control line to hammock: \(error)")
            }
        }
    }

    /// Closes the pipe after every write handed over before. `EngineLines` calls it once, at the end, and
    /// hands over no write after it.
    func close() {
        queue.submit { [descriptor] in _ = Glibc.close(descriptor) }
    }
}

extension EngineLines {
    /// Sends `command` with a fresh id and returns when the engine acknowledges it. Throws
    /// `HammockError.refused` with the engine's message when it cannot carry it out, and the engine's end
    /// (`engineExited`, `stopped`) when it ends first. A cancelled caller stops waiting (`CancellationError`);
    /// the line, once sent, is carried out all the same.
    func perform(_ command: ControlCommand) async throws {
        if let end { throw end ?? HammockError.stopped }
        guard case .object(var object) = try JSONValueEncoder().encode(command) else { return }
        let id = nextControlID
        nextControlID += 1
        object["id"] = .number(JSONNumber(id))
        var line = JSONValue.object(object).jsonBytes
        line.append(UInt8(ascii: "\n"))
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (call: CheckedContinuation<Void, any Error>) in
                pending[id] = call
                writer.write(line) { message in
                    // The failure is told on the writer's thread, which cannot await: one actor call, then it ends.
                    Task { await self.stopWaiting(id, HammockError.io(message)) }
                }
            }
        } onCancel: {
            // Runs on the actor after the call above was registered: the actor does one thing at a time. A
            // cancellation handler is synchronous: one actor call, then the task ends.
            Task { await self.stopWaiting(id, CancellationError()) }
        }
    }

    private func stopWaiting(_ id: Int, _ error: any Error) {
        pending.removeValue(forKey: id)?.resume(throwing: error)
    }
}
