import Glibc
import HammockCore
import HammockJSON
import NIOCore
import NIOHTTP1
import Testing

@testable import HammockRESTPlugin

/// What came back, or what went wrong, in words: in-process, no server.
@Suite struct AnswerContentTests {
    private func content(_ body: String, _ contentType: String?, as parse: RESTOptions.Parse? = nil) -> Result<JSONValue, SourceError> {
        parseContent(Array(body.utf8), contentType: contentType, as: parse)
    }

    @Test func jsonLinesByParseOrByTheirMediaTypes() throws {
        #expect(try content("{\"a\":1}\n{\"a\":2}\n", "application/x-ndjson").get() == [["a": 1], ["a": 2]])
        #expect(try content("1\n2\n", "text/plain", as: .jsonl).get() == [1, 2])
        guard case .failure(let error) = content("{}\n{}\n", "application/json") else {
            Issue.record("two values parsed as one")
            return
        }
        #expect(error.message == "the answer (Content-Type application/json) is not one JSON value but 2 lines of JSON; set parse: jsonl")
    }

    @Test func theContentTypeChoosesUnlessParseSays() throws {
        #expect(try content(#"{"a": 1}"#, "application/json; charset=utf-8").get() == ["a": 1])
        #expect(try content(#"[1]"#, "application/vnd.api+json").get() == [1])
        #expect(try content(#"{"a": 1}"#, "text/plain").get() == #"{"a": 1}"#)
        #expect(try content(#"{"a": 1}"#, nil).get() == #"{"a": 1}"#)
        #expect(try content(#"{"a": 1}"#, "text/plain", as: .json).get() == ["a": 1])
        #expect(try content(#"{"a": 1}"#, "application/json", as: .text).get() == #"{"a": 1}"#)
    }

    @Test func anEmptyJSONAnswerIsNull() throws {
        #expect(try content("", "application/json").get() == .null)
        #expect(try content(" \r\n\t", nil, as: .json).get() == .null)
    }

    @Test func textLosesOneFinalNewlineAndAByteOrderMark() throws {
        #expect(try content("hello\r\n", "text/plain").get() == "hello")
        #expect(try content("a\n\n", "text/plain").get() == "a\n")
        #expect(try parseContent([0xEF, 0xBB, 0xBF] + Array("hi".utf8), contentType: nil, as: nil).get() == "hi")
        #expect(try parseContent([0xEF, 0xBB, 0xBF] + Array("[2]".utf8), contentType: "application/json", as: nil).get() == [2])
    }

    @Test func failuresSayWhatWasExpectedAndWhy() {
        guard case .failure(let byType) = content("{oops", "application/json") else {
            Issue.record("bad JSON parsed")
            return
        }
        #expect(byType.code == .parseFailed)
        #expect(byType.message.hasPrefix("the answer (Content-Type application/json) is not JSON: "), "\(byType.message)")
        guard case .failure(let asked) = content("{oops", "text/html", as: .json) else {
            Issue.record("bad JSON parsed")
            return
        }
        #expect(asked.message.hasPrefix("the answer is not JSON: "), "\(asked.message)")
        #expect(
            parseContent([0x61, 0xFF], contentType: "text/plain", as: nil)
                == .failure(SourceError(message: "the answer (Content-Type text/plain) is not UTF-8 text; set parse: json, or fetch text", code: .parseFailed)))
        #expect(
            parseContent([0xFF], contentType: nil, as: .text)
                == .failure(SourceError(message: "the answer is not UTF-8 text; set parse: json, or fetch text", code: .parseFailed)))
    }
}

@Suite struct HTTPErrorTests {
    private func error(_ status: HTTPResponseStatus, _ body: String?, contentType: String? = nil, retryAfter: String? = nil) -> SourceError {
        var headers = HTTPHeaders()
        if let contentType { headers.add(name: "Content-Type", value: contentType) }
        if let retryAfter { headers.add(name: "Retry-After", value: retryAfter) }
        return httpError(status: status, headers: headers, body: body.map { Array($0.utf8) })
    }

    @Test func theStatusAloneWhenTheServerSaysNothingUseful() {
        #expect(error(.notFound, nil) == SourceError(message: "HTTP 404 Not Found", httpStatus: 404))
        #expect(error(.notFound, "") == SourceError(message: "HTTP 404 Not Found", httpStatus: 404))
        #expect(error(.badGateway, "<html><body>bad</body></html>", contentType: "text/html").message == "HTTP 502 Bad Gateway")
        #expect(error(.badGateway, "<html>bad</html>").message == "HTTP 502 Bad Gateway")
        #expect(error(.badRequest, #"{"code": 7}"#).message == "HTTP 400 Bad Request")
    }

    @Test func theServersOwnWordsFromJSON() {
        #expect(error(.notFound, #"{"message": "no such repo"}"#).message == "HTTP 404 Not Found: no such repo")
        #expect(error(.badRequest, #"{"error": "bad query"}"#).message == "HTTP 400 Bad Request: bad query")
        #expect(error(.badRequest, #"{"error": {"message": "nested"}}"#).message == "HTTP 400 Bad Request: nested")
        #expect(error(.forbidden, #"{"title": "Forbidden", "detail": "token expired"}"#).message == "HTTP 403 Forbidden: token expired")
        #expect(error(.forbidden, #"{"message": "  ", "title": "t"}"#).message == "HTTP 403 Forbidden: t")
    }

    @Test func theFirstLineOfShortPlainText() {
        #expect(error(.serviceUnavailable, "  down for maintenance \nretry later").message == "HTTP 503 Service Unavailable: down for maintenance")
        #expect(error(.serviceUnavailable, "down", contentType: "text/plain; charset=utf-8").message == "HTTP 503 Service Unavailable: down")
        #expect(error(.serviceUnavailable, "down", contentType: "application/octet-stream").message == "HTTP 503 Service Unavailable")
    }

    @Test func aLongMessageIsCutAtAWordAndNeverSplitsOne() {
        let words = String(repeating: "word ", count: 1000)
        let message = error(.badRequest, #"{"message": "\#(words)"}"#).message
        let detail = message.dropFirst("HTTP 400 Bad Request: ".count)
        #expect(detail.hasSuffix("word…"), "\(detail.suffix(20))")
        #expect(detail.utf8.count <= errorDetailLimit + "…".utf8.count)
        #expect(detail.utf8.count > errorDetailLimit - 10)

        let token = String(repeating: "é", count: 3000)
        let cut = error(.badRequest, #"{"message": "\#(token)"}"#).message.dropFirst("HTTP 400 Bad Request: ".count)
        #expect(cut == String(repeating: "é", count: errorDetailLimit / 2) + "…")
    }

    @Test func retryAfterIsPassedOn() {
        #expect(error(.tooManyRequests, nil, retryAfter: "30").retryAfter == .seconds(30))
        #expect(error(.tooManyRequests, nil, retryAfter: "later").retryAfter == nil)
        #expect(error(.tooManyRequests, nil).retryAfter == nil)
    }
}

@Suite struct FailureDescriptionTests {
    private struct Unexpected: Error {}

    private let url = "https://api.example.com:8443/items"
    private func describe(_ error: any Error) -> SourceError {
        HammockRESTPlugin.describe(error, url: url, deadline: .now + .seconds(60))
    }

    @Test func theHostIsNamedWithItsPortWhenNotTheSchemes() {
        #expect(hostDescription("https://api.example.com/a") == "api.example.com")
        #expect(hostDescription("http://127.0.0.1:8080/a") == "127.0.0.1:8080")
        #expect(hostDescription("not a url") == "not a url")
    }

    @Test func eachFailureHasItsCode() {
        #expect(describe(CancellationError()) == SourceError(message: "the load was cancelled", code: .cancelled))
        #expect(describe(HTTP1ClientError.deadlineExceeded) == SourceError(message: "timeout: api.example.com:8443 did not answer in time", code: .timeout))
        #expect(describe(HTTP1ClientError.connectTimeout).message == "timeout: could not connect to api.example.com:8443 in time")
        #expect(describe(HTTP1ClientError.remoteConnectionClosed).code == .connectionClosed)
        #expect(describe(HTTP1ClientError.tlsHandshakeTimeout).code == .tls)
        #expect(describe(IOError(errnoCode: ECONNREFUSED, reason: "connect")).code == .connectionRefused)
        #expect(describe(IOError(errnoCode: EHOSTUNREACH, reason: "connect")).code == .unreachable)
        #expect(describe(IOError(errnoCode: ECONNRESET, reason: "read")).code == .connectionClosed)
        #expect(describe(IOError(errnoCode: ETIMEDOUT, reason: "connect")).code == .timeout)
        #expect(describe(ChannelError.connectTimeout(.seconds(1))).code == .timeout)
        #expect(describe(Unexpected()) == SourceError(message: "the request to api.example.com:8443 failed: Unexpected()", code: .network))
    }

    @Test func aCancelAfterTheDeadlineIsATimeout() {
        let late = HammockRESTPlugin.describe(CancellationError(), url: url, deadline: .now - .seconds(1))
        #expect(late.code == .timeout)
    }
}
