import ArgumentParser
import HammockCore
import HammockEngine
import HammockHTTP
import HammockJSON
import Logging

/// `--http HOST:PORT` on `run` and `serve`: the engine's health, for service managers, orchestrators and
/// load balancers (docs/http.md). Each answer is the loop's own, asked in its turn (`Engine.ask`): a loop
/// that does not answer within `answerTimeout` is unhealthy, whatever the process does.
enum HTTPDoor {
    /// How long a route waits for the loop.
    static let answerTimeout: Duration = .seconds(2)

    /// The address as written, checked: a host other machines can reach is refused (a bearer token will
    /// guard it, issue 28).
    static func address(_ text: String) throws -> HTTPAddress {
        guard let address = HTTPAddress(text) else {
            throw usageError("--http \"\(text)\" is not HOST:PORT; for example --http 127.0.0.1:8080")
        }
        guard address.isLoopback else {
            throw usageError("--http \(text): only this machine's loopback is served for now (127.0.0.1, ::1, localhost)")
        }
        return address
    }

    /// Listens at once (a port in use stops hammock before any plugin starts) and answers for `engine`.
    static func start(_ address: HTTPAddress, engine: Engine, logger: Logger) async throws -> HTTPServer {
        do {
            let server = try await HTTPServer.start(address, option: "--http", routes: routes(engine))
            logger.notice("serving health at http://\(server.address)/healthz and /readyz")
            return server
        } catch {
            logger.critical("\(error)")
            throw ExitCode(2)
        }
    }

    static func routes(_ engine: Engine) -> [HTTPServer.Route] {
        [
            HTTPServer.Route("/healthz") { _ in
                guard case .alive(let sources, let watched) = await engine.ask(.health, timeout: answerTimeout) else {
                    return .json(503, #"{"status":"unresponsive","error":"the engine's loop did not answer within \#(answerTimeout)"}"#)
                }
                return .json(200, #"{"status":"ok","sources":\#(sources),"watched":\#(watched)}"#)
            },
            HTTPServer.Route("/readyz") { request in
                let views = request.query["views"].map { $0.split(separator: ",").map { ViewID(String($0)) } }
                switch await engine.ask(.readiness(views: views), timeout: answerTimeout) {
                case .waiting(let ids) where ids.isEmpty:
                    return .json(200, #"{"ready":true}"#)
                case .waiting(let ids):
                    return .json(503, #"{"ready":false,"waiting":\#(list(ids.map(\.rawValue)))}"#)
                case .unknownViews(let ids):
                    return .json(404, #"{"error":"no such view","views":\#(list(ids.map(\.rawValue)))}"#)
                case .alive, nil:
                    return .json(503, #"{"ready":false,"error":"the engine's loop did not answer within \#(answerTimeout)"}"#)
                }
            },
        ]
    }

    private static func list(_ texts: [String]) -> String {
        JSONValue.array(texts.map { .string($0) }).jsonString
    }
}
