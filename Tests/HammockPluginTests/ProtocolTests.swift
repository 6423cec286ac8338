import HammockCore
import HammockJSON
import HammockProtocol
import Testing

/// The wire protocol's messages: each one's text (as docs/plugin-protocol.md shows it), its round trip, the
/// hand-written forms of `load` and `newData` against the declared Codable form, and the errors a line that
/// is not protocol gets.
@Suite struct ProtocolMessages {
    static let problem = OptionProblem(pointer: JSONPointer(tokens: ["headers", "Accept"]), message: "expected a string")
    static let fullError = SourceError(
        message: "HTTP 503", httpStatus: 503, exitStatus: 2, code: .timeout, retryAfter: .milliseconds(1500), transient: true)

    static let engineMessages: [(EngineMessage, String)] = [
        (.hello(protocol: 1), #"{"op":"hello","protocol":1}"#),
        (.configure(source: "oslo", options: ["city": "Oslo", "units": "metric"]), #"{"op":"configure","source":"oslo","options":{"city":"Oslo","units":"metric"}}"#),
        (.load(source: "oslo", id: 1, etag: nil, lastModified: nil, timeout: 10), #"{"op":"load","source":"oslo","id":1,"timeout":10}"#),
        (
            .load(source: "a", id: 9_007_199_254_740_993, etag: "\"v1\"", lastModified: "Mon, 02 Jan 2006 15:04:05 GMT", timeout: 0.25),
            #"{"op":"load","source":"a","id":9007199254740993,"etag":"\"v1\"","lastModified":"Mon, 02 Jan 2006 15:04:05 GMT","timeout":0.25}"#
        ),
        (.load(source: "a", id: 2, etag: nil, lastModified: nil, timeout: nil), #"{"op":"load","source":"a","id":2}"#),
        (.cancel(id: 3), #"{"op":"cancel","id":3}"#),
        (.remove(source: "a"), #"{"op":"remove","source":"a"}"#),
        (.shutdown, #"{"op":"shutdown"}"#),
    ]

    static let pluginMessages: [(PluginMessage, String)] = [
        (.hello(protocol: 1, kinds: ["weather", "sky"], version: "0.3.0"), #"{"type":"hello","protocol":1,"kinds":["weather","sky"],"version":"0.3.0"}"#),
        (
            .hello(
                protocol: 1, kinds: ["shell", "rest"], version: "1",
                templates: [
                    "shell": TemplateRules(refused: [JSONPointer(tokens: ["script"]): "no", JSONPointer(tokens: ["env", "a/b"]): "never"]),
                    "rest": TemplateRules(urlEncoded: [JSONPointer(tokens: ["url"]), JSONPointer(tokens: ["base"])]),
                ]),
            #"{"type":"hello","protocol":1,"kinds":["shell","rest"],"version":"1","templates":{"rest":{"urlEncoded":["/base","/url"]},"shell":{"refused":{"/env/a~1b":"never","/script":"no"}}}}"#
        ),
        (
            .hello(
                protocol: 1, kinds: ["weather", "sky"], version: "1",
                optionsSchema: [
                    "weather": ["type": "object", "properties": ["city": ["type": "string"]], "additionalProperties": false],
                    "sky": ["type": "object"],
                ]),
            #"{"type":"hello","protocol":1,"kinds":["weather","sky"],"version":"1","optionsSchema":{"sky":{"type":"object"},"weather":{"type":"object","properties":{"city":{"type":"string"}},"additionalProperties":false}}}"#
        ),
        (.configured(source: "oslo"), #"{"type":"configured","source":"oslo"}"#),
        (.invalid(source: "rome", errors: [problem]), #"{"type":"invalid","source":"rome","errors":[{"path":"/headers/Accept","message":"expected a string"}]}"#),
        (
            .newData(id: 1, source: "oslo", content: ["temp": .number(JSONNumber(text: "-3.50")!), "big": .number(JSONNumber(text: "12345678901234567890")!)], etag: nil, lastModified: nil),
            #"{"type":"newData","source":"oslo","id":1,"content":{"temp":-3.50,"big":12345678901234567890}}"#
        ),
        (.newData(id: 2, source: nil, content: nil, etag: "e", lastModified: "l"), #"{"type":"newData","id":2,"content":null,"etag":"e","lastModified":"l"}"#),
        (.pushedData(source: "f", content: ["z": 1, "a": [true]]), #"{"type":"newData","source":"f","content":{"z":1,"a":[true]}}"#),
        (.notModified(id: 4), #"{"type":"notModified","id":4}"#),
        (.error(id: 5, source: "a", error: SourceError(message: "gone")), #"{"type":"error","source":"a","id":5,"error":{"message":"gone"}}"#),
        (
            .error(id: 6, source: nil, error: fullError),
            #"{"type":"error","id":6,"error":{"message":"HTTP 503","httpStatus":503,"exitStatus":2,"code":"timeout","retryAfter":1.5,"transient":true}}"#
        ),
        (
            .pushedError(source: "f", error: SourceError(message: "vanished", code: SourceError.Code("myOwnCode"))),
            #"{"type":"error","source":"f","error":{"message":"vanished","code":"myOwnCode"}}"#
        ),
        (.cancelled(id: 7), #"{"type":"cancelled","id":7}"#),
        (.started(id: 8), #"{"type":"started","id":8}"#),
        (.fresh(id: 9, seconds: 60), #"{"type":"fresh","id":9,"seconds":60}"#),
        (.meta(id: 10, meta: ["httpStatus": 200, "url": "http://x/"]), #"{"type":"meta","id":10,"meta":{"httpStatus":200,"url":"http://x/"}}"#),
        (.pushedMeta(source: "f", meta: ["size": 3]), #"{"type":"meta","source":"f","meta":{"size":3}}"#),
        (.noStore(id: 11), #"{"type":"noStore","id":11}"#),
        (
            .hello(protocol: 1, kinds: ["shell"], version: "1", queuesLoads: true),
            #"{"type":"hello","protocol":1,"kinds":["shell"],"version":"1","queuesLoads":true}"#
        ),
    ]

    @Test func everyEngineMessageHasItsTextAndRoundTrips() throws {
        for (message, text) in Self.engineMessages {
            #expect(message.line == Array((text + "\n").utf8), "\(message)")
            #expect(try JSONValueEncoder().encode(message).jsonString == text, "the declared form of \(message)")
            #expect(try EngineMessage(line: Array(text.utf8)) == message)
            #expect(try JSONValueDecoder().decode(EngineMessage.self, from: JSONValue(parsing: text)) == message)
        }
    }

    @Test func everyPluginMessageHasItsTextAndRoundTrips() throws {
        for (message, text) in Self.pluginMessages {
            #expect(message.line == Array((text + "\n").utf8), "\(message)")
            #expect(try JSONValueEncoder().encode(message).jsonString == text, "the declared form of \(message)")
            #expect(try PluginMessage(line: Array(text.utf8)) == message)
            #expect(try JSONValueDecoder().decode(PluginMessage.self, from: JSONValue(parsing: text)) == message)
        }
    }

    @Test func answersAndPushesAreTold() throws {
        func message(_ text: String) throws -> PluginMessage { try PluginMessage(line: Array(text.utf8)) }
        let answer = try message(#"{"type":"newData","source":"s","id":3,"content":1}"#)
        #expect(answer.loadID == 3 && answer.pushedSource == nil)
        let push = try message(#"{"type":"newData","source":"s","content":1}"#)
        #expect(push == .pushedData(source: "s", content: 1))
        #expect(push.loadID == nil && push.pushedSource == "s")
        // A null id is no id, as for every optional member.
        #expect(try message(#"{"type":"newData","source":"s","id":null,"content":1}"#) == push)
        #expect(try message(#"{"type":"error","source":"s","error":"bad"}"#) == .pushedError(source: "s", error: SourceError(message: "bad")))
        #expect(try message(#"{"type":"error","id":8,"error":"bad"}"#) == .error(id: 8, source: nil, error: SourceError(message: "bad")))
        #expect(push.type == "newData" && answer.type == "newData")
    }

    /// Lines the hand-written forms read, and lines they leave to the declared form: for each, `init(line:)`
    /// and the Codable decoder agree, on the message or on the error.
    @Test(arguments: [
        #"{"type":"newData","source":"s","id":1,"content":{"b":1,"a":2.50}}"#,
        #"{"type":"newData","id":1e2,"content":[]}"#,
        #"{"type":"newData","id":1,"source":null,"content":0,"etag":null,"lastModified":"x","extra":{}}"#,
        #"{"type":"newData","source":"s","content":"x","etag":5}"#,
        #"{"type":"newData","source":"s","id":1.5,"content":0}"#,
        #"{"type":"newData","source":"s","id":"1","content":0}"#,
        #"{"type":"newData","source":7,"content":0}"#,
        #"{"type":"newData","id":1,"content":0,"etag":false}"#,
        #"{"type":"newData","id":1}"#,
        #"{"type":"newData","content":0}"#,
        #"{"type":"newData","source":"s"}"#,
        #"{"type":"started","id":4}"#,
        #"{"type":"started","id":4,"extra":[1]}"#,
        #"{"type":"fresh","id":4,"seconds":1.5}"#,
        #"{"type":"fresh","id":4,"seconds":-1}"#,
        #"{"type":"fresh","id":4,"seconds":"60"}"#,
        #"{"type":"fresh","id":4}"#,
        #"{"type":"meta","id":4,"meta":[1]}"#,
        #"{"type":"meta","id":4}"#,
        #"{"type":"meta","meta":{}}"#,
        #"{"type":"meta","id":4,"meta":{"httpStatus":304,"etag":"\"v1\"","url":"http://x/"}}"#,
        #"{"type":"meta","id":4,"source":"s","meta":{}}"#,
        #"{"type":"meta","id":null,"source":"s","meta":{"size":3}}"#,
        #"{"type":"meta","source":"s","meta":{"size":3},"extra":1}"#,
        #"{"type":"meta","id":1e2,"meta":{}}"#,
        #"{"type":"meta","id":4.5,"meta":{}}"#,
        #"{"type":"meta","id":"4","meta":{}}"#,
        #"{"type":"meta","id":4,"meta":null}"#,
        #"{"type":"meta","id":4,"meta":{"a":{"b":[1,2.5,null]}},"extra":[1]}"#,
        #"{"type":"started","id":1e2}"#,
        #"{"type":"started","id":"4"}"#,
        #"{"type":"started","id":4.5}"#,
        #"{"type":"started"}"#,
    ])
    func handWrittenNewDataIsTheDeclaredForm(_ text: String) throws {
        let value = try JSONValue(parsing: text)
        let declared: Result<PluginMessage, any Error> = Result { try JSONValueDecoder().decode(PluginMessage.self, from: value) }
        let read: Result<PluginMessage, any Error> = Result { try PluginMessage(line: Array(text.utf8)) }
        switch (read, declared) {
        case (.success(let message), .success(let expected)):
            #expect(message == expected)
            #expect(message.json == (try JSONValueEncoder().encode(message)))
        case (.failure(let error as ProtocolError), .failure):
            #expect(!error.message.isEmpty)
        default:
            Issue.record("init(line:) gave \(read), the declared form \(declared)")
        }
    }

    @Test(arguments: [
        #"{"op":"load","source":"s","id":1}"#,
        #"{"op":"load","source":"s","id":1,"etag":"e","lastModified":"l","timeout":2.5,"more":1}"#,
        #"{"op":"load","source":"s","id":1,"etag":null,"timeout":null}"#,
        #"{"op":"load","source":"s","id":1,"timeout":1e400}"#,
        #"{"op":"load","source":"s","id":1,"timeout":"5"}"#,
        #"{"op":"load","source":"s","id":12345678901234567890}"#,
        #"{"op":"load","source":"s"}"#,
        #"{"op":"load","id":1}"#,
        #"{"op":"load","source":"s","id":1,"etag":3}"#,
    ])
    func handWrittenLoadIsTheDeclaredForm(_ text: String) throws {
        let value = try JSONValue(parsing: text)
        let declared: Result<EngineMessage, any Error> = Result { try JSONValueDecoder().decode(EngineMessage.self, from: value) }
        let read: Result<EngineMessage, any Error> = Result { try EngineMessage(line: Array(text.utf8)) }
        switch (read, declared) {
        case (.success(let message), .success(let expected)):
            #expect(message == expected)
            #expect(message.json == (try JSONValueEncoder().encode(message)))
        case (.failure(let error as ProtocolError), .failure):
            #expect(!error.message.isEmpty)
        default:
            Issue.record("init(line:) gave \(read), the declared form \(declared)")
        }
    }

    @Test func aTimeoutJSONCannotWriteIsLeftOut() {
        let message = EngineMessage.load(source: "s", id: 1, etag: nil, lastModified: nil, timeout: .infinity)
        #expect(message.line == Array(#"{"op":"load","source":"s","id":1}"#.utf8) + [10])
        #expect((try? JSONValueEncoder().encode(message)) == message.json)
    }

    func pluginFailure(_ text: String) -> String? {
        do {
            _ = try PluginMessage(line: Array(text.utf8))
            return nil
        } catch {
            return error.message
        }
    }

    func engineFailure(_ text: String) -> String? {
        do {
            _ = try EngineMessage(line: Array(text.utf8))
            return nil
        } catch {
            return error.message
        }
    }

    /// A hello's `templates` is optional (a plugin without rules leaves it out); each member of a kind's rules
    /// is optional too.
    /// An options schema names only kinds of the hello: one for a kind it does not serve is a mistake.
    @Test func helloOptionsSchemaOfAnotherKindIsRefused() {
        let line = #"{"type":"hello","protocol":1,"kinds":["k"],"version":"2","optionsSchema":{"other":{"type":"object"}}}"#
        #expect(throws: ProtocolError.self) { try PluginMessage(line: Array(line.utf8)) }
    }

    @Test func helloWithAndWithoutTemplateRules() throws {
        let plain = try PluginMessage(line: Array(#"{"type":"hello","protocol":1,"kinds":["k"],"version":"2"}"#.utf8))
        #expect(plain == .hello(protocol: 1, kinds: ["k"], version: "2", templates: [:]))
        let empty = try PluginMessage(line: Array(#"{"type":"hello","protocol":1,"kinds":["k"],"templates":{"k":{}}}"#.utf8))
        #expect(empty == .hello(protocol: 1, kinds: ["k"], version: "unknown", templates: ["k": TemplateRules()]))
        let encoded = try PluginMessage(
            line: Array(#"{"type":"hello","protocol":1,"kinds":["k"],"version":"2","templates":{"k":{"urlEncoded":["/u"]}}}"#.utf8))
        #expect(encoded == .hello(protocol: 1, kinds: ["k"], version: "2", templates: ["k": TemplateRules(urlEncoded: [JSONPointer(tokens: ["u"])])]))
    }

    /// What the engine logs (and the plugin check prints) for a line that is not protocol: where and why.
    @Test func errorsSayWhichMemberAndWhy() {
        #expect(pluginFailure("nope")?.hasPrefix("not JSON: ") == true)
        #expect(pluginFailure("nope")?.hasSuffix(" at byte 0") == true)
        #expect(pluginFailure("[1]") == "the line must be an object, got an array")
        #expect(pluginFailure(#"{"id":1}"#) == #""type" is missing"#)
        #expect(pluginFailure(#"{"type":1}"#) == #""type" must be a string, got a number"#)
        #expect(
            pluginFailure(#"{"type":"hi"}"#)
                == #""type" must be one of hello, configured, invalid, newData, notModified, error, cancelled, started, fresh, meta, noStore, got "hi""#)
        #expect(pluginFailure(#"{"type":"hello","protocol":1}"#) == #"hello: "kinds" is missing"#)
        #expect(pluginFailure(#"{"type":"hello","protocol":1,"kinds":[]}"#) == #"hello: "kinds" must be a non-empty list of strings"#)
        #expect(pluginFailure(#"{"type":"hello","protocol":1,"kinds":["a",2]}"#) == #"hello: "kinds/1" must be a string, got a number"#)
        #expect(pluginFailure(#"{"type":"hello","protocol":"1","kinds":["a"]}"#) == #"hello: "protocol" must be an integer, got a string"#)
        #expect(
            pluginFailure(#"{"type":"hello","protocol":1,"kinds":["a"],"templates":{"b":{}}}"#)
                == #"hello: "templates" names kind "b", which is not in "kinds""#)
        #expect(
            pluginFailure(#"{"type":"hello","protocol":1,"kinds":["a"],"templates":{"a":{"urlEncoded":["url"]}}}"#)
                == #"hello: "templates/a/urlEncoded" must hold JSON Pointers to options (like "/url"), got "url""#)
        #expect(
            pluginFailure(#"{"type":"hello","protocol":1,"kinds":["a"],"templates":{"a":{"refused":{"/s":1}}}}"#)
                == #"hello: "templates/a/refused/~1s" must be a string, got a number"#)
        #expect(pluginFailure(#"{"type":"configured"}"#) == #"configured: "source" is missing"#)
        #expect(pluginFailure(#"{"type":"invalid","source":"s","errors":{}}"#) == #"invalid: "errors" must be a list, got an object"#)
        #expect(pluginFailure(#"{"type":"invalid","source":"s","errors":[{"path":"/a"}]}"#) == #"invalid: "errors/0/message" is missing"#)
        #expect(
            pluginFailure(#"{"type":"invalid","source":"s","errors":[{"path":"a","message":"m"}]}"#)
                == #"invalid: "errors/0/path" must be a JSON Pointer (empty, or "/" before each key), got "a""#)
        #expect(pluginFailure(#"{"type":"newData","content":1}"#) == #"newData: the line needs an "id" (an answer) or a "source" (a push)"#)
        #expect(pluginFailure(#"{"type":"newData","id":1}"#) == #"newData: "content" is missing"#)
        #expect(pluginFailure(#"{"type":"newData","id":1.5,"content":1}"#) == #"newData: "id" must be an integer, got 1.5"#)
        #expect(pluginFailure(#"{"type":"error","id":1}"#) == #"error: "error" is missing"#)
        #expect(
            pluginFailure(#"{"type":"error","id":1,"error":5}"#)
                == #"error: "error" must be a message or {message, httpStatus?, exitStatus?, code?, retryAfter?, transient?}"#)
        #expect(pluginFailure(#"{"type":"error","id":1,"error":{"code":"x"}}"#) == #"error: "error/message" is missing"#)
        #expect(pluginFailure(#"{"type":"notModified","id":"1"}"#) == #"notModified: "id" must be an integer, got a string"#)
        #expect(engineFailure(#"{"op":"load","source":"s","id":1,"timeout":1e400}"#) == #"load: "timeout" must be a number Double can hold, got 1e400"#)
        #expect(
            engineFailure(#"{"op":"reboot"}"#) == #""op" must be one of hello, configure, load, cancel, remove, shutdown, got "reboot""#)
    }

    /// Optional details of a plugin's error that are the wrong kind are dropped, not fatal: the failure
    /// still reaches the consumer, as it always has.
    @Test func wrongDetailsOfAnErrorAreIgnored() throws {
        let line = #"{"type":"error","id":1,"error":{"message":"m","httpStatus":"404","exitStatus":1.5,"code":7,"retryAfter":-1,"transient":"yes"}}"#
        #expect(try PluginMessage(line: Array(line.utf8)) == .error(id: 1, source: nil, error: SourceError(message: "m")))
    }
}

/// `SourceError.Code`: members for the codes hammock knows, any other word a plugin sends, the same string
/// on the wire.
@Suite struct ErrorCodes {
    @Test func codesAreTheirWordOnTheWire() throws {
        #expect(try JSONValueEncoder().encode(SourceError.Code.templateUnresolved) == "templateUnresolved")
        #expect(SourceError(message: "m", code: .timeout).json == ["message": "m", "code": "timeout"])
        let line = #"{"type":"error","id":1,"error":{"message":"m","code":"quotaExceeded"}}"#
        guard case .error(_, _, let error) = try PluginMessage(line: Array(line.utf8)) else {
            Issue.record("not an error")
            return
        }
        #expect(error.code == SourceError.Code("quotaExceeded"))
        #expect(error.code?.rawValue == "quotaExceeded")
        #expect(error.isTransient, "a code hammock does not know is worth retrying")
    }

    @Test func permanentCodesAreMembers() {
        #expect(SourceError.Code.parseFailed.isPermanent)
        #expect(SourceError.Code("fileMissing").isPermanent, "a plugin's word and the member are the same code")
        #expect(!SourceError.Code.timeout.isPermanent)
        #expect(!SourceError(message: "m", code: .tooManyRedirects).isTransient)
    }
}
