import Foundation
import HammockClient
import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

@Suite("Launch to the first typed state, on the demo configuration")
struct ClientDemoTimingTests {
    /// The project's root, where configs/demo.yaml's relative paths start.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    struct System: Decodable, Sendable {
        var load: String
        var clock: String
    }

    /// Measured, not asserted tightly: the machine may be loaded. Prints the median of five launches, from
    /// the call to `launch` to the first state with content of the `greeting` source (a fake answering after
    /// 200 ms) and of the `system` view (a command's output and a stream's first line).
    @Test("five launches of configs/demo.yaml: the median time to the first typed state")
    func demoFirstTypedState() async throws {
        var toSource: [Duration] = []
        var toView: [Duration] = []
        for _ in 0..<5 {
            try await RunSlots.withSlot {
                let start = ContinuousClock.now
                let hammock = try await Hammock.launch(
                    configuration: "configs/demo.yaml", binary: try HammockProcess.executablePath(),
                    workingDirectory: Self.root)
                do {
                    let greeting = await hammock.source("greeting")
                    let system = await hammock.view("system", as: System.self)
                    // The view first: it does not wait for the greeting's 200 ms, and awaiting the greeting
                    // first would have made its time the view's too.
                    let content = try await first("system's content", in: system.contents, timeout: .seconds(30))
                    toView.append(ContinuousClock.now - start)
                    #expect(!content.load.isEmpty)
                    _ = try await first("greeting's content", in: greeting.contents, timeout: .seconds(30))
                    toSource.append(ContinuousClock.now - start)
                } catch {
                    await hammock.stop()
                    throw error
                }
                await hammock.stop()
            }
        }
        func median(_ times: [Duration]) -> Duration { times.sorted()[times.count / 2] }
        print("launch → greeting's first typed content: median \(median(toSource)) of \(toSource)")
        print("launch → system view's first typed content: median \(median(toView)) of \(toView)")
        #expect(median(toView) < .seconds(30))
    }
}
