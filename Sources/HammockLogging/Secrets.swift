import HammockCore
import Synchronization

/// The secrets hammock knows of, shared by everything that writes: stdout, stderr and logs.
///
/// A reload adds its configuration's secrets and none is ever forgotten, because content loaded with an old
/// one may still be on screen. A `Mutex` because readers are on the stdout thread, log calls and plugin
/// stderr tasks alike, and each read is a copy of one small value.
public final class Secrets: Sendable {
    private let state: Mutex<(secrets: Set<String>, redactor: Redactor)>

    public init(_ secrets: Set<String> = []) {
        state = Mutex((secrets, Redactor(secrets: secrets)))
    }

    public func add(_ more: Set<String>) {
        state.withLock { state in
            guard !more.isSubset(of: state.secrets) else { return }
            state.secrets.formUnion(more)
            state.redactor = Redactor(secrets: state.secrets)
        }
    }

    public var redactor: Redactor { state.withLock { $0.redactor } }
}
