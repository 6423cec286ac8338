import Glibc
import HammockProtocol
import HammockSystem

/// A HammockPluginKit plugin run inside hammock, for the kinds hammock serves itself (`BuiltInPlugins`):
/// the same protocol as a plugin process, lines in and lines out, through memory instead of pipes.
///
/// The plugin serves in a child task of `run`. Closing its input ends it as the end of stdin ends a plugin
/// process; `kill` ends it at once (its task is cancelled, which stops its sources), so nothing of it
/// outlives `run`. Its lines are queued without bound: unlike a pipe's writer it cannot be held back, and a
/// built-in plugin writes no more than the answers to the loads it is sent.
struct InProcessTransport: PluginTransport {
    /// Serves the protocol until its input ends or says `shutdown`, and returns once its sources have
    /// stopped: lines from the host (without their newline) come from `input`, and each line for the host
    /// (newline included) goes to `writeLine`. `Plugin.serve` of HammockPluginKit.
    typealias Serve = @Sendable (
        _ input: AsyncStream<[UInt8]>, _ writeLine: @escaping @Sendable ([UInt8]) -> Void
    ) async -> Void

    private let serve: Serve
    private let input = AsyncStream.makeStream(of: [UInt8].self)
    private let output = AsyncStream.makeStream(of: Output.self)

    private enum Output {
        case line([UInt8])
        case killed
    }

    init(serve: @escaping Serve) { self.serve = serve }

    func send(line: [UInt8]) { input.continuation.yield(Array(line.dropLast())) }

    func closeInput() { input.continuation.finish() }

    func kill() {
        input.continuation.finish()
        output.continuation.yield(.killed)
    }

    func run(receive: ([LineSplitter.Piece]) async -> Void) async -> PluginExit {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [serve, input, output] in
                await serve(input.stream) { output.continuation.yield(.line($0)) }
                output.continuation.finish()
            }
            var exit = PluginExit.exited(0)
            reading: for await event in output.stream {
                switch event {
                case .line(let line):
                    await receive([.line(Array(line.dropLast()))])
                case .killed:
                    exit = .killed(signal: SIGKILL)
                    break reading
                }
            }
            // Nothing more reaches a plugin that has ended; one that was killed stops its sources now.
            input.continuation.finish()
            group.cancelAll()
            return exit
        }
    }
}
