import ArgumentParser
import FoundationEssentials
import Glibc
import HammockJSON
import HammockSystem

struct Ctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Send one control line to a configuration's shared engine and wait for its answer.",
        discussion: """
            The control line is one of those `hammock run` reads on stdin (docs/protocol.md, "Control"), e.g.

              hammock ctl bar.yaml '{"op":"load","source":"weather"}'
              hammock ctl bar.yaml '{"op":"retry","view":"status"}'

            An "id" is added when the line has none. Exits 0 when the engine acknowledges the line, 1 with the \
            engine's message on stderr when it refuses it, 2 for a line that is not a JSON object with an "op" \
            or when no engine serves the configuration (ctl never starts one: `hammock serve CONFIG` or \
            `hammock attach CONFIG` does). The states the op causes go to every client of the engine.
            """)

    @OptionGroup var address: EngineAddressArguments

    @Argument(help: "The control line: a JSON object with an \"op\".")
    var controlLine: String

    @Option(help: "How long to wait for the engine's answer (e.g. 10s, 2m).")
    var timeout = Parsed(OptionDuration(.seconds(60)))

    /// The `id` ctl gives a line that has none.
    static let defaultID = "hammock-ctl"

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let timeout = try timeout.value { ValidationError("--timeout: \($0)") }.duration
        guard case .object(var object)? = try? JSONValue(parsing: controlLine), object["op"]?.stringValue != nil else {
            throw usageError("the control line must be a JSON object with an \"op\" (docs/protocol.md): \(controlLine)")
        }
        if object["op"]?.stringValue == "subscribe" {
            throw usageError("subscribe is a client's first line, not a control line; `hammock get` and `hammock attach` subscribe")
        }
        if object["id"] == nil { object["id"] = .string(Self.defaultID) }
        let line = JSONValue.object(object)
        let (configuration, socket) = try address.resolve()
        let config = address.config
        let outcome = await OwnThread.run(named: "hammock.ctl") {
            Result { () throws -> Int32 in
                let connection = try EngineConnection.open(config: config, configuration: configuration, socket: socket, start: nil)
                try connection.subscribe(sources: [], views: [], id: nil)
                _ = try connection.readHello(configuration: configuration)
                try connection.send(line.jsonString)
                let deadline = ContinuousClock.now + timeout
                while true {
                    switch connection.next(before: deadline) {
                    case .timedOut:
                        throw EngineConnection.clientError("the engine at \(socket) did not answer within \(timeout)", status: 1)
                    case .end:
                        throw EngineConnection.clientError("the engine at \(socket) closed the connection before answering", status: 1)
                    case .line(let bytes):
                        guard let answer = try? JSONValue(parsing: bytes) else { continue }
                        let type = answer["type"]?.stringValue
                        if type == "ack" && answer["id"] == line["id"] { return 0 }
                        if type == "error" && (answer["id"] == nil || answer["id"] == line["id"]) {
                            throw EngineConnection.clientError(answer["message"]?.stringValue ?? "the engine refused the line", status: 1)
                        }
                    }
                }
            }
        }
        let status = try outcome.get()
        if status != 0 { throw ExitCode(status) }
    }
}
