import FoundationEssentials
import HammockCore
import HammockJSON
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL

/// The rest plugin's own failure codes, beside the common ones in `SourceError.Code`.
extension SourceError.Code {
    static let badLink = Self("badLink")
    static let connectionClosed = Self("connectionClosed")
    static let connectionRefused = Self("connectionRefused")
    static let http = Self("http")
    static let network = Self("network")
    static let tls = Self("tls")
    static let unknownHost = Self("unknownHost")
    static let unreachable = Self("unreachable")
}

// Turning what came back (or what went wrong) into content or an error a person can act on. Messages name
// the host, never the request's headers: they may hold a secret.

/// Content from a successful answer's body: JSON or text, as `parse` says or else by Content-Type.
func parseContent(_ bytes: [UInt8], contentType: String?, as parse: RESTOptions.Parse?) -> Result<JSONValue, SourceError> {
    let type = mediaType(contentType)
    let format = parse ?? (isJSONLinesMediaType(type) ? .jsonl : isJSONMediaType(type) ? .json : .text)
    let skipped = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    let body = bytes[skipped...]
    switch format {
    case .json:
        // A 204, or a 200 with nothing in it: there is no value, which JSON spells null.
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return .success(.null) }
        do {
            return .success(try JSONValue(parsing: body))
        } catch {
            let what = parse == nil ? "the answer (Content-Type \(type ?? "none"))" : "the answer"
            if let count = JSONValue.jsonLinesCount(body) {
                return .failure(
                    SourceError(message: "\(what) is not one JSON value but \(count) lines of JSON; set parse: jsonl", code: .parseFailed))
            }
            return .failure(
                SourceError(message: "\(what) is not JSON: \(error.message) at byte \(skipped + error.offset)", code: .parseFailed))
        }
    case .jsonl:
        do {
            return .success(.array(try JSONValue.parseLines(body)))
        } catch {
            let what = parse == nil ? "the answer (Content-Type \(type ?? "none"))" : "the answer"
            return .failure(SourceError(message: "\(what) is not JSON Lines: \(error)", code: .parseFailed))
        }
    case .text:
        // Like a shell's $(…): a final newline (\n or \r\n) is not part of the value. Cut as bytes: Swift
        // takes "\r\n" as one Character, which a String's hasSuffix("\n") does not find.
        var end = body.endIndex
        if end > body.startIndex, body[end - 1] == UInt8(ascii: "\n") { end -= 1 }
        if end > body.startIndex, body[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        guard let text = String(validating: body[..<end], as: UTF8.self) else {
            let what = type.map { "the answer (Content-Type \($0))" } ?? "the answer"
            return .failure(SourceError(message: "\(what) is not UTF-8 text; set parse: json, or fetch text", code: .parseFailed))
        }
        return .success(.string(text))
    }
}

/// `HTTP 404 Not Found: no such repo`: the status, and the server's own words when it gave some.
func httpError(status: HTTPResponseStatus, headers: HTTPHeaders, body: [UInt8]?) -> SourceError {
    var message = "HTTP \(status.code) \(status.reasonPhrase)"
    if let body, let detail = errorDetail(body, contentType: headers.first(name: "content-type")) {
        message += ": " + detail
    }
    return SourceError(
        message: message, httpStatus: Int(status.code),
        retryAfter: headers.first(name: "retry-after").flatMap { retryAfter($0) })
}

/// The message in an error answer: a JSON body's `message`, `error` (or `error.message`), `detail` or
/// `title`; or the first line of a short plain-text body. Never HTML.
private func errorDetail(_ body: [UInt8], contentType: String?) -> String? {
    let type = mediaType(contentType)
    if let json = try? JSONValue(parsing: body) {
        let candidates: [JSONValue?] = [json["message"], json["error"], json["error"]?["message"], json["detail"], json["title"]]
        for candidate in candidates {
            if let text = candidate?.stringValue?.trimmingWhitespace(), !text.isEmpty {
                return shortened(text)
            }
        }
        return nil
    }
    guard type == nil || type == "text/plain", let text = String(validating: body, as: UTF8.self) else { return nil }
    let line = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingSpacesAndTabs() } ?? ""
    guard !line.isEmpty, !line.hasPrefix("<") else { return nil }
    return shortened(line)
}

/// At most this many bytes of the server's message go to the engine.
///
/// Not the length a person reads: the engine redacts every string it receives and only then shortens the
/// message for display. A cut here could split a secret the plugin does not know of (a server quoting the
/// token it was sent) and leave its first characters where redaction no longer finds them, so this bound
/// is far above what is displayed, only there to keep a line small.
let errorDetailLimit = 4096

/// The message on one line, cut (when at all) after the last whitespace within `errorDetailLimit` bytes,
/// so that a word, a token included, goes whole or not at all; a message with no whitespace to cut at is
/// cut on a UTF-8 boundary.
private func shortened(_ text: String) -> String {
    let oneLine = text.split(whereSeparator: \.isNewline).joined(separator: " ")
    guard oneLine.utf8.count > errorDetailLimit else { return oneLine }
    var kept = String.UnicodeScalarView()
    var bytes = 0
    var lastSpace: String.UnicodeScalarView.Index?
    for scalar in oneLine.unicodeScalars {
        bytes += scalar.utf8.count
        if bytes > errorDetailLimit { break }
        if scalar.properties.isWhitespace { lastSpace = kept.endIndex }
        kept.append(scalar)
    }
    if let lastSpace { kept.removeSubrange(lastSpace...) }
    return String(kept) + "…"
}

/// `api.github.com`, or `127.0.0.1:8080` when the port is not the scheme's own.
func hostDescription(_ url: String) -> String {
    guard let components = URLComponents(string: url), let host = components.host else { return url }
    if let port = components.port { return "\(host):\(port)" }
    return host
}

/// A failure before a complete answer, in plain words, with a `code` a program can act on.
func describe(_ error: any Error, url: String, deadline: ContinuousClock.Instant) -> SourceError {
    let host = hostDescription(url)
    if error is CancellationError {
        // The load's deadline cancels it (`LoadDeadlines`): then it is a timeout.
        if ContinuousClock.now >= deadline {
            return SourceError(message: "timeout: \(host) did not answer in time", code: .timeout)
        }
        return SourceError(message: "the load was cancelled", code: .cancelled)
    }
    if let client = error as? HTTP1ClientError {
        switch client {
        case .deadlineExceeded:
            return SourceError(message: "timeout: \(host) did not answer in time", code: .timeout)
        case .connectTimeout:
            return SourceError(message: "timeout: could not connect to \(host) in time", code: .timeout)
        case .tlsHandshakeTimeout:
            return SourceError(message: "TLS failure: the TLS handshake with \(host) timed out", code: .tls)
        case .remoteConnectionClosed:
            return SourceError(message: "\(host) closed the connection before answering", code: .connectionClosed)
        case .unsupportedScheme, .invalidURL:
            return SourceError(message: "the request to \(host) failed: \(client)", code: .http, transient: false)
        case .proxyRefused:
            return SourceError(message: "the request to \(host) failed: \(client)", code: .network)
        }
    }
    if let decompression = error as? NIOHTTPDecompression.DecompressionError {
        if case .limit = decompression {
            return SourceError(
                message: "the answer from \(host) decompresses to more than 1000 times its compressed size; refused", code: .tooLarge)
        }
        return SourceError(message: "the answer from \(host) could not be decompressed: \(decompression)", code: .network)
    }
    if let decompression = error as? NIOHTTPDecompression.ExtraDecompressionError {
        return SourceError(message: "the answer from \(host) could not be decompressed: \(decompression)", code: .network)
    }
    if let connection = error as? NIOConnectionError {
        if connection.dnsAError != nil || connection.dnsAAAAError != nil, connection.connectionErrors.isEmpty {
            return unknownHost(connection.host)
        }
        if let first = connection.connectionErrors.first?.error { return describe(first, url: url, deadline: deadline) }
        return unknownHost(connection.host)
    }
    if let unknown = error as? SocketAddressError.UnknownHost { return unknownHost(unknown.host) }
    if let io = error as? IOError {
        switch io.errnoCode {
        case ECONNREFUSED:
            return SourceError(message: "connection refused by \(host): nothing listens there (is the server running?)", code: .connectionRefused)
        case ETIMEDOUT:
            return SourceError(message: "timeout: could not connect to \(host) in time", code: .timeout)
        case ENETUNREACH, EHOSTUNREACH:
            return SourceError(message: "\(host) cannot be reached from this machine (no route to it)", code: .unreachable)
        case ECONNRESET, EPIPE:
            return SourceError(message: "\(host) reset the connection", code: .connectionClosed)
        default:
            return SourceError(message: "the connection to \(host) failed: \(io)", code: .network)
        }
    }
    if error is NIOSSLError || error is NIOSSLExtraError || error is BoringSSLError {
        return SourceError(message: "TLS failure with \(host): \(error)", code: .tls)
    }
    if let channel = error as? ChannelError, case .connectTimeout = channel {
        return SourceError(message: "timeout: could not connect to \(host) in time", code: .timeout)
    }
    return SourceError(message: "the request to \(host) failed: \(error)", code: .network)
}

private func unknownHost(_ host: String) -> SourceError {
    SourceError(message: "unknown host \(host): its name does not resolve (check the url, or the network)", code: .unknownHost)
}
