import Foundation
import Testing

/// Servers and certificates for the rest plugin's HTTP tests (Tests/Fixtures' Python servers, `openssl`).
public enum HTTPFixtures {
    /// A Python server of Tests/Fixtures (`http1-server.py`, `logging-proxy.py`), which prints its port on its
    /// first line, for the length of `body`.
    public static func with<R>(
        _ name: String, arguments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation,
        _ body: (_ port: Int, _ process: HammockProcess) async throws -> R
    ) async throws -> R {
        let server = try HammockProcess.launch(
            program: "/usr/bin/python3", arguments: [TestFiles.fixture(name)] + arguments, sourceLocation: sourceLocation)
        do {
            let lines = try await server.waitForStdoutLines("\(name) prints its port", timeout: .seconds(30)) { !$0.isEmpty }
            guard let port = Int(lines[0]) else { throw HammockHarnessError(message: "\(name) printed \(lines[0])", sourceLocation: sourceLocation) }
            let result = try await body(port, server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// The lines `process` printed that start with `prefix`.
    public static func printed(_ process: HammockProcess, _ prefix: String) -> [String] {
        process.stdoutText.split(separator: "\n").map(String.init).filter { $0.hasPrefix(prefix) }
    }

    /// A CA, a server certificate for `names` (subjectAltName, e.g. `DNS:localhost,IP:127.0.0.1`) signed by
    /// it and the certificate's key, made by the `openssl` command in a fresh folder the caller removes.
    ///
    /// `openssl` runs under `BoundedRun`, which waits without holding a thread of the cooperative pool:
    /// `Process.waitUntilExit()` here held one of its two threads, and with the other blocked by another test,
    /// a whole-suite run hung.
    public static func makeCertificates(names: String) async throws -> (directory: String, ca: String, cert: String, key: String) {
        let directory = try HammockProcess.makeTemporaryDirectory()
        func run(_ arguments: [String]) async throws {
            let ran = try await BoundedRun.run("/usr/bin/openssl", arguments, directory: directory, timeout: .seconds(60))
            guard ran.termination == .exited(0) else {
                throw HammockHarnessError(
                    message: "openssl \(arguments.joined(separator: " ")) failed (\(ran.termination)): \(ran.stderr.suffix(1000))",
                    sourceLocation: #_sourceLocation)
            }
        }
        try await run([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=hammock test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        try await run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=hammock test server"])
        try "subjectAltName=\(names)\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n".write(
            toFile: directory + "/ext.cnf", atomically: true, encoding: .utf8)
        try await run([
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2",
            "-extfile", "ext.cnf",
        ])
        return (directory, directory + "/ca.pem", directory + "/server.pem", directory + "/server.key")
    }
}
