import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// hammock in a user namespace, as sandboxes (bubblewrap, Flatpak) and the swaybar consumer's sway run it:
/// nothing it does may need a capability there. The rest plugin once set SO_DEBUG on every connection (a
/// TCP option asked for at the socket level), which needs CAP_NET_ADMIN: every request failed with EACCES.
@Suite("in a user namespace")
struct UserNamespaceTests {
    static let unshare = ["/usr/bin/unshare", "--user", "--map-user=1000", "--map-group=1000"]

    /// Whether this kernel lets the test make a user namespace.
    static var available: Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = Array(unshare.dropFirst()) + ["true"]
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    @Test("a rest source loads from a server on 127.0.0.1", .enabled(if: available, "the kernel allows no user namespace"))
    func aRestSourceLoads() async throws {
        let server = try await CountingHTTPServer.start()
        defer { Task { await server.process.stop() } }
        let config = """
            version: 1
            sources:
              counter: { kind: rest, url: "http://127.0.0.1:\(server.port)/n", retry: off }
            """
        try await HammockProcess.withRunning(config: config, launcher: Self.unshare) { hammock in
            let line = try await hammock.waitFor(type: "source", id: "counter") { $0.event == "newData" || $0.event == "error" }
            #expect(line.event == "newData", "\(line)")
            #expect(server.requests == 1)
        }
    }
}
