import HammockCore
import HammockJSON
import HammockProtocol

/// What a plugin says of itself in its hello, read by starting it, saying hello, and ending it: for
/// `hammock schema`, which describes each kind's options as its plugin does.
public struct PluginHello: Sendable {
    public var kinds: [String]
    public var optionsSchema: [String: JSONValue]

    /// Starts `command`, reads its hello, and ends it (shutdown, then its guard kills whatever is left).
    /// Fails with a sentence that says what happened: it did not start, exited, or wrote something else. What
    /// it quotes of the plugin's line is redacted with `redactor` before it is cut (see `Redactor.excerpt`);
    /// the caller redacts the whole sentence again, for the command.
    public static func read(
        command: [String], within timeout: Duration = .seconds(10), redactor: Redactor = .none
    ) async -> Result<PluginHello, PluginHelloError> {
        let session = PluginSession(command: command)
        return await withTaskGroup(of: Void.self, returning: Result<PluginHello, PluginHelloError>.self) { group in
            group.addTask { await session.serve() }
            session.send(.hello(protocol: pluginProtocolVersion))
            let answer = await session.next(within: timeout) { _ in true }
            session.send(.shutdown)
            session.closeInput()
            if await session.waitForExit(timeout: .seconds(2)) == nil { session.kill() }
            let program = command.joined(separator: " ")
            switch answer {
            case .line(let line):
                if let error = line.error {
                    return .failure(PluginHelloError("\(program) answered hello with a line that is not protocol (\(error.message)): \(line.excerpt(redactor))"))
                }
                guard case .hello(_, let kinds, _, _, _, let schemas)? = line.message else {
                    return .failure(PluginHelloError("\(program) answered hello with \(line.excerpt(redactor))"))
                }
                return .success(PluginHello(kinds: kinds, optionsSchema: schemas))
            case .exited(let status):
                return .failure(PluginHelloError("\(program) \(status) before answering hello\(await session.stderrExcerpt)"))
            case .timedOut:
                return .failure(PluginHelloError("\(program) did not answer hello within \(timeout.humanReadable)"))
            }
        }
    }
}

public struct PluginHelloError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
