import Foundation
import HammockClient
import HammockTestSupport
import Testing

/// Runs `body` with the real, built engine launched through the library on `config` (written to a fresh
/// folder, which is the engine's working folder), holding a `RunSlots` slot; stops the engine and removes
/// the folder however `body` ends.
func withClientEngine<Result: Sendable>(
    config: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (Hammock, _ directory: String) async throws -> Result
) async throws -> Result {
    try await RunSlots.withSlot {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(config, in: directory)
        let hammock = try await Hammock.launch(
            configuration: path, binary: try HammockProcess.executablePath(sourceLocation: sourceLocation),
            environment: HammockProcess.environment([:], home: directory), workingDirectory: directory)
        do {
            let result = try await body(hammock, directory)
            await hammock.stop()
            return result
        } catch {
            await hammock.stop()
            throw error
        }
    }
}

/// The first element of `sequence` that satisfies `predicate`, or a failure naming `what` when the sequence
/// ends or `timeout` passes first.
func first<Sequence: AsyncSequence & Sendable>(
    _ what: String, in sequence: Sequence, timeout: Duration = .seconds(10),
    sourceLocation: SourceLocation = #_sourceLocation,
    where predicate: @escaping @Sendable (Sequence.Element) -> Bool = { _ in true }
) async throws -> Sequence.Element where Sequence.Element: Sendable {
    try await withThrowingTaskGroup(of: Sequence.Element?.self) { group in
        group.addTask {
            for try await element in sequence where predicate(element) { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let found = try await group.next(), let element = found else {
            throw ClientTestFailure("no \(what) within \(timeout) (or the stream ended first)", sourceLocation)
        }
        return element
    }
}

struct ClientTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ message: String, _ location: SourceLocation) { description = "\(message) (at \(location))" }
}

/// Two fake sources and a view over both: fast, deterministic, no network.
let fakeConfig = """
    version: 1
    sources:
      greeting:
        kind: fake
        content: { text: "hello", count: 3 }
      numbers:
        kind: fake
        content: [1, 2, 3]
    views:
      both:
        sources: [greeting, numbers]
        ready: all
    """

struct Greeting: Codable, Sendable, Equatable {
    var text: String
    var count: Int
}

struct Both: Decodable, Sendable, Equatable {
    var greeting: Greeting
    var numbers: [Int]
}
