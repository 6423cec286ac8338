import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockPluginKit
import HammockSystem
import NIOCore
import NIOHTTP1
import Synchronization

extension SourceError.Code {
    /// The OAuth2 token endpoint gave no usable token: what it said is in the message.
    static let oauth2 = Self("oauth2")
}

/// An access token from a token endpoint.
struct OAuth2Token: Sendable, Equatable {
    var accessToken: String
    /// When it expires (`expires_in` after it was asked for); nil when the endpoint did not say, and then it
    /// is used until the API answers 401.
    var expiresAt: Date?
    /// Its `expires_in`, for when to renew it.
    var lifetime: Duration?

    /// How long before its expiry a token is renewed: a quarter of its lifetime, at most a minute. A load
    /// that comes later gets a new one, so no request goes out with a token about to expire on its way (a
    /// short-lived token is renewed well ahead: its answer may take a while on a loaded machine).
    static func renewalMargin(lifetime: Duration) -> Duration { min(.seconds(60), lifetime / 4) }

    /// Whether its expiry has passed at `now` (never, without one).
    func hasExpired(at now: Date) -> Bool { expiresAt.map { now >= $0 } ?? false }

    /// Whether it may still be sent at `now`, or should be renewed first.
    func isUsable(at now: Date) -> Bool {
        guard let expiresAt else { return true }
        let margin = lifetime.map(Self.renewalMargin) ?? .zero
        return now.addingTimeInterval(margin.secondsValue) < expiresAt
    }
}

/// What a token endpoint answered, read: a token and, for `refresh_token`, perhaps the next refresh token
/// (rotation).
struct TokenAnswer: Sendable, Equatable {
    var token: OAuth2Token
    var refreshToken: String?
    /// Why the answer's `expires_in` was not used, for a log line.
    var expiryNote: String?
}

/// The access tokens of every `auth: { oauth2 }` source of the plugin: one per set of credentials (token
/// URL, client, scope, grant), shared by the sources that use the same ones, and asked for once at a time
/// however many loads need it at once.
///
/// A token is a secret hammock obtains rather than one the configuration declares, so the engine cannot
/// redact it: `redactor` holds the tokens (and rotated refresh tokens) this plugin has obtained, and every
/// answer and log line of the plugin passes through it before it leaves (see `RESTSource.load`).
final class OAuth2Tokens: Sendable {
    private struct Entry {
        var token: OAuth2Token?
        /// The latest refresh token: the configured one, or the one the endpoint rotated it to.
        var refreshToken: String?
        var pending: Task<Result<OAuth2Token, SourceError>, Never>?
        var cacheRead = false
        /// Some source with these credentials says `cache: true`: the token is kept on disk for all of them.
        var cache = false
    }

    private struct State {
        var entries: [OAuth2Options: Entry] = [:]
        /// The tokens obtained, newest last, at most `rememberedSecrets`.
        var obtained: [String] = []
        var redactor = Redactor.none
    }

    /// How many obtained tokens stay redacted: the current ones and enough old ones that an answer quoting
    /// a token used a while ago is still caught, while the redaction of each answer stays cheap.
    static let rememberedSecrets = 64
    /// A token shorter than this is refused: redacting it would blank out its letters everywhere.
    static let shortestToken = 8
    /// The most of a token endpoint's answer that is read.
    static let answerLimit = 64 << 10
    /// A token request never takes longer than this, its answer's body included. It is not bound to the
    /// timeout of the load that started it: other loads may be waiting for it, each until its own timeout.
    static let defaultRequestTimeout: Duration = .seconds(30)

    private let state = Mutex(State())
    /// Where `cache: true` keeps tokens: `oauth2/` in the offline cache folder (see `cacheDirectory`).
    let cacheDirectory: String
    let requestTimeout: Duration

    init(cacheDirectory: String = OAuth2Tokens.cacheDirectory(), requestTimeout: Duration = OAuth2Tokens.defaultRequestTimeout) {
        self.cacheDirectory = cacheDirectory
        self.requestTimeout = requestTimeout
    }

    /// The engine's offline cache folder, by the engine's rule (`$HAMMOCK_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/hammock`, else `~/.cache/hammock`), and `oauth2/` in it.
    static func cacheDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let base: String
        if let explicit = environment["HAMMOCK_CACHE_DIR"], !explicit.isEmpty {
            base = explicit
        } else if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty {
            base = xdg + "/hammock"
        } else {
            base = (environment["HOME"] ?? "/tmp") + "/.cache/hammock"
        }
        return base + "/oauth2"
    }

    /// Notes a source's credentials when it is configured, before its first load: when one of the sources
    /// sharing a token says `cache: true`, the token is kept on disk whichever of them asks for it first.
    func register(_ options: OAuth2Options) {
        guard options.cache else { return }
        state.withLock { state in
            var entry = state.entries[Self.key(options)] ?? Entry(refreshToken: options.refreshToken)
            entry.cache = true
            state.entries[Self.key(options)] = entry
        }
    }

    /// Replaces every token this plugin obtained by `[redacted]`.
    var redactor: Redactor { state.withLock { $0.redactor } }

    /// A token for `options`: the one held while it is usable and not `rejecting` (the token the API just
    /// refused with a 401), else a new one from the token endpoint, asked for by one load while the others
    /// that need it wait for the same answer. A load waits until the answer comes or it is cancelled (its
    /// timeout), whichever is first.
    func token(
        for options: OAuth2Options, client: HTTP1Client, rejecting: String? = nil, now: Date = Date()
    ) async -> Result<String, SourceError> {
        let key = Self.key(options)
        // The cache file is read (once per set of credentials) and removed outside the lock, which every
        // load's redaction also takes: a slow disk must not hold up the plugin's answers.
        let readsCache = state.withLock { state in
            let entry = state.entries[key]
            return (options.cache || entry?.cache == true) && entry?.cacheRead != true
        }
        let cached = readsCache ? readCache(options, now: now) : nil
        enum Step {
            case use(String)
            /// For a new token; `fallback` is the token held, due for renewal but not expired yet.
            case wait(Task<Result<OAuth2Token, SourceError>, Never>, fallback: OAuth2Token?)
        }
        var removesCache = false
        defer { if removesCache { removeCache(options) } }
        let step: Step = state.withLock { state in
            var entry = state.entries[key] ?? Entry(refreshToken: options.refreshToken)
            defer { state.entries[key] = entry }
            entry.cache = entry.cache || options.cache
            if readsCache && !entry.cacheRead {
                entry.cacheRead = true
                if let cached, entry.token == nil {
                    entry.token = cached
                    remember(cached.accessToken, in: &state)
                }
            }
            if let rejecting, entry.token?.accessToken == rejecting {
                entry.token = nil
                removesCache = entry.cache
            }
            if let token = entry.token, token.isUsable(at: now) { return .use(token.accessToken) }
            let fallback = entry.token.flatMap { $0.hasExpired(at: now) ? nil : $0 }
            if let pending = entry.pending { return .wait(pending, fallback: fallback) }
            let refreshToken = entry.refreshToken
            let requestDeadline = ContinuousClock.now + requestTimeout
            let pending = Task {
                // The client's deadline covers the answer's head only: an endpoint that sends a head and then
                // stalls in its body is cut off here, so that a request always ends and the next can be made.
                let work = Task { await self.request(options, refreshToken: refreshToken, client: client, deadline: requestDeadline) }
                let cutOff = Task {
                    guard (try? await Task.sleep(until: requestDeadline, clock: .continuous)) != nil else { return }
                    work.cancel()
                }
                let result = await work.value
                cutOff.cancel()
                self.finish(key, options: options, with: result)
                return result.map(\.token)
            }
            entry.pending = pending
            return .wait(pending, fallback: fallback)
        }
        switch step {
        case .use(let token):
            return .success(token)
        case .wait(let task, let fallback):
            // The request goes on for the other loads waiting for it when this one is cancelled (its own
            // deadline passed): that load ends now, not when a request another load started ends.
            guard let result = await valueUnlessCancelled(task) else {
                return .failure(SourceError(message: "the load was cancelled", code: .cancelled))
            }
            // A renewal ahead of expiry that failed: the token held is still good until it expires.
            if case .failure(let error) = result, let fallback, !fallback.hasExpired(at: Date()) {
                pluginLog(redactor.redact("renewing the OAuth2 token failed (\(error.message)); the current one is used until it expires"))
                return .success(fallback.accessToken)
            }
            return result.map(\.accessToken)
        }
    }

    /// Keeps what the endpoint answered (and forgets the request in flight).
    private func finish(_ key: OAuth2Options, options: OAuth2Options, with result: Result<TokenAnswer, SourceError>) {
        let cache = state.withLock { state in
            var entry = state.entries[key] ?? Entry()
            entry.pending = nil
            if case .success(let answer) = result {
                entry.token = answer.token
                remember(answer.token.accessToken, in: &state)
                if let rotated = answer.refreshToken, options.grant == .refreshToken {
                    entry.refreshToken = rotated
                    remember(rotated, in: &state)
                }
            }
            state.entries[key] = entry
            return entry.cache
        }
        guard case .success(let answer) = result else { return }
        if let note = answer.expiryNote {
            pluginLog("OAuth2 token endpoint \(hostDescription(options.tokenURL)): \(note)")
        }
        if cache { writeCache(options, token: answer.token) }
    }

    private func remember(_ secret: String, in state: inout State) {
        guard !state.obtained.contains(secret) else { return }
        state.obtained.append(secret)
        if state.obtained.count > Self.rememberedSecrets { state.obtained.removeFirst(state.obtained.count - Self.rememberedSecrets) }
        state.redactor = Redactor(secrets: state.obtained)
    }

    /// The credentials a token belongs to: the options without `cache`, which says only where it is kept.
    private static func key(_ options: OAuth2Options) -> OAuth2Options {
        var key = options
        key.cache = false
        return key
    }

    // MARK: The token request

    /// Asks the token endpoint for a token (RFC 6749 §4.4 and §6).
    private func request(
        _ options: OAuth2Options, refreshToken: String?, client: HTTP1Client, deadline: ContinuousClock.Instant
    ) async -> Result<TokenAnswer, SourceError> {
        var form: [(String, String)] = [("grant_type", options.grant.rawValue)]
        if options.grant == .refreshToken, let refreshToken { form.append(("refresh_token", refreshToken)) }
        if let scope = options.scope { form.append(("scope", scope)) }
        form += options.params.map { ($0.name, $0.value) }
        var request = HTTP1Request(url: options.tokenURL, method: .POST)
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: RESTSource.userAgent)
        request.bodyLimit = .init(bytes: Self.answerLimit, truncating: true)
        request.otherBodyLimit = .init(bytes: Self.answerLimit, truncating: true)
        if let secret = options.clientSecret, options.clientAuth == .basic {
            request.headers.add(name: "Authorization", value: Self.basicCredentials(id: options.clientID, secret: secret))
        } else {
            form.append(("client_id", options.clientID))
            if let secret = options.clientSecret { form.append(("client_secret", secret)) }
        }
        request.body = Array(formEncoded(form).utf8)

        let host = hostDescription(options.tokenURL)
        do {
            let response = try await client.execute(request, deadline: nioDeadline(deadline))
            let body = response.body ?? []
            var result = Self.interpret(
                status: Int(response.status.code), contentType: response.headers.first(name: "content-type"), body: body,
                host: host, now: Date())
            if case .failure(var error) = result, let delay = response.headers.first(name: "retry-after").flatMap({ retryAfter($0) }) {
                error.retryAfter = delay
                result = .failure(error)
            }
            return result
        } catch {
            var described = describe(error, url: options.tokenURL, deadline: deadline)
            if ContinuousClock.now >= deadline {
                described = SourceError(
                    message: "timeout: no complete answer within \(requestTimeout.humanReadable)", code: .timeout)
            }
            described.message = "OAuth2 token endpoint \(host): " + described.message
            described.code = .oauth2
            described.transient = true
            return .failure(described)
        }
    }

    /// `Basic` of the form-encoded id and secret, as RFC 6749 §2.3.1 asks.
    static func basicCredentials(id: String, secret: String) -> String {
        "Basic " + Data((formEncode(id) + ":" + formEncode(secret)).utf8).base64EncodedString()
    }

    /// The OAuth2 errors that asking again cannot cure: the credentials, the grant or the request are wrong.
    static let permanentErrors: Set<String> = [
        "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope", "invalid_request",
        "access_denied",
    ]

    /// What a token endpoint's answer means: a token, or an error that says it came from the token endpoint.
    static func interpret(status: Int, contentType: String?, body: [UInt8], host: String, now: Date) -> Result<TokenAnswer, SourceError> {
        let prefix = "OAuth2 token endpoint \(host)"
        let type = mediaType(contentType)
        let looksHTML = type == "text/html" || type == "application/xhtml+xml"
            || body.drop(while: { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }).first == UInt8(ascii: "<")
        let statusText = "HTTP \(status) \(HTTPResponseStatus(statusCode: status).reasonPhrase)"
        func failure(_ message: String, transient: Bool) -> Result<TokenAnswer, SourceError> {
            .failure(SourceError(message: "\(prefix): \(message)", httpStatus: status, code: .oauth2, transient: transient))
        }
        let retryable = status >= 500 || [408, 425, 429].contains(status)
        if (300..<400).contains(status) {
            // A POST with the client's credentials is not sent on to wherever a redirect points.
            return failure("\(statusText), a redirect, not followed: give token-url the address that answers", transient: false)
        }
        guard (200..<300).contains(status) else {
            if looksHTML { return failure("\(statusText), an HTML page, not a token", transient: retryable) }
            if let json = try? JSONValue(parsing: body), let code = json["error"]?.stringValue {
                var message = "\(statusText): \(oneLine(code, limit: 100))"
                if let description = json["error_description"]?.stringValue, !description.isEmpty {
                    message += " (" + oneLine(description, limit: 500) + ")"
                }
                return failure(message, transient: retryable && !permanentErrors.contains(code))
            }
            return failure(statusText, transient: retryable)
        }
        if looksHTML { return failure("answered HTML, not a token (\(statusText), Content-Type \(type ?? "none"))", transient: false) }
        guard let json = try? JSONValue(parsing: body), json.objectValue != nil else {
            return failure("answered something that is not a JSON object, not a token (\(statusText), Content-Type \(type ?? "none"))", transient: false)
        }
        if let code = json["error"]?.stringValue {
            return failure("answered \(statusText) with an error: \(oneLine(code, limit: 100))", transient: !permanentErrors.contains(code))
        }
        guard let accessToken = json["access_token"]?.stringValue, !accessToken.isEmpty else {
            return failure("answered without an access_token", transient: false)
        }
        guard accessToken.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return failure("answered an access_token that is not one word of visible ASCII, which no Authorization header can carry", transient: false)
        }
        guard accessToken.utf8.count >= shortestToken else {
            return failure("answered an access_token of \(accessToken.utf8.count) characters, too short to keep out of the output", transient: false)
        }
        if let tokenType = json["token_type"]?.stringValue, tokenType.lowercased() != "bearer" {
            return failure("answered a token of type \"\(oneLine(tokenType, limit: 40))\"; only Bearer tokens are supported", transient: false)
        }
        var expiryNote: String?
        var lifetime: Duration?
        switch json["expires_in"] {
        case nil, .null?:
            expiryNote = "the token has no expires_in; it is used until the API answers 401"
        case let value?:
            // A number, or a number as a string (some servers send "3600").
            let seconds = value.numberValue.map { $0.doubleValue } ?? value.stringValue.flatMap { Double($0) }
            if let seconds, seconds.isFinite, seconds >= 1 {
                lifetime = .seconds(min(seconds, Double(longestTokenLifetime)))
            } else {
                expiryNote = "the token's expires_in is not a positive number of seconds; it is used until the API answers 401"
            }
        }
        var refreshToken: String?
        if let rotated = json["refresh_token"]?.stringValue, !rotated.isEmpty,
            rotated.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }), rotated.utf8.count >= shortestToken
        {
            refreshToken = rotated
        }
        let token = OAuth2Token(
            accessToken: accessToken, expiresAt: lifetime.map { now.addingTimeInterval($0.secondsValue) }, lifetime: lifetime)
        return .success(TokenAnswer(token: token, refreshToken: refreshToken, expiryNote: expiryNote))
    }

    /// A year: an `expires_in` beyond it is taken as a year.
    static let longestTokenLifetime = 365 * 86_400

    // MARK: The cache file

    /// The file a token of these credentials is kept in: named by a hash of the token URL, client, scope and
    /// grant, and holding them too, so that a file of other credentials is never used. With
    /// `grant: refresh_token` the configured refresh token (one user's grant) is part of them, as a hash:
    /// two sources with the same client and another user's refresh token must not share a token. The hash
    /// reveals nothing of a refresh token that is not already on disk (the file holds an access token of
    /// the same grant); the client secret is not part of it (a new secret of the same client gets the same
    /// tokens).
    func cacheFile(_ options: OAuth2Options) -> String {
        cacheDirectory + "/token-" + FNV1a.hex(Self.cacheIdentity(options).jsonString) + ".json"
    }

    private static func cacheIdentity(_ options: OAuth2Options) -> JSONValue {
        var identity: JSONObject = [
            "tokenURL": .string(options.tokenURL), "clientID": .string(options.clientID),
            "scope": options.scope.map(JSONValue.string) ?? .null, "grant": .string(options.grant.rawValue),
        ]
        if options.grant == .refreshToken, let refreshToken = options.refreshToken {
            identity["refreshToken"] = .string(FNV1a.hex(refreshToken))
        }
        // Another audience is another token; a value may be a secret, so only a hash of them.
        if !options.params.isEmpty {
            identity["params"] = .string(FNV1a.hex(formEncoded(options.params.map { ($0.name, $0.value) })))
        }
        return .object(identity)
    }

    /// The token kept in the cache file, when there is one of these credentials that is still usable. A file
    /// that does not read is ignored (and said so): a new token is asked for, and it replaces the file.
    func readCache(_ options: OAuth2Options, now: Date) -> OAuth2Token? {
        let path = cacheFile(options)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard let bytes = Descriptor.readAll(descriptor, limit: Self.answerLimit), let json = try? JSONValue(parsing: bytes),
            json["for"] == Self.cacheIdentity(options),
            let accessToken = json["accessToken"]?.stringValue, accessToken.utf8.count >= Self.shortestToken,
            accessToken.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
            let expiresAt = json["expiresAt"]?.numberValue?.doubleValue,
            let lifetime = json["lifetime"]?.numberValue?.doubleValue, lifetime >= 1
        else {
            pluginLog("the OAuth2 token cache file \(path) does not read as one for these credentials; ignoring it, a new token is asked for")
            return nil
        }
        let token = OAuth2Token(accessToken: accessToken, expiresAt: Date(timeIntervalSince1970: expiresAt), lifetime: .seconds(lifetime))
        return token.isUsable(at: now) ? token : nil
    }

    /// Writes the token to its cache file, mode 0600 in a folder of mode 0700, through a temporary file
    /// renamed over it (a reader never sees half a file). A token without an expiry is not kept on disk.
    func writeCache(_ options: OAuth2Options, token: OAuth2Token) {
        guard let expiresAt = token.expiresAt, let lifetime = token.lifetime else { return }
        let path = cacheFile(options)
        var object = JSONObject()
        object["for"] = Self.cacheIdentity(options)
        object["accessToken"] = .string(token.accessToken)
        object["expiresAt"] = .number(JSONNumber(expiresAt.timeIntervalSince1970))
        object["lifetime"] = .number(JSONNumber(lifetime.secondsValue))
        let bytes = Array(JSONValue.object(object).jsonString.utf8)
        do {
            try FileManager.default.createDirectory(
                atPath: cacheDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            // The folder may have been there with a looser mode.
            guard chmod(cacheDirectory, 0o700) == 0 else { throw CacheFileError(what: "chmod", code: errno) }
            let temporary = path + ".\(getpid()).tmp"
            unlink(temporary)
            let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard descriptor >= 0 else { throw CacheFileError(what: "open", code: errno) }
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            let closed = close(descriptor)
            guard written == bytes.count, closed == 0 else {
                unlink(temporary)
                throw CacheFileError(what: "write", code: errno)
            }
            guard rename(temporary, path) == 0 else {
                let code = errno
                unlink(temporary)
                throw CacheFileError(what: "rename", code: code)
            }
        } catch {
            pluginLog("cannot keep the OAuth2 token in \(path): \(error); it is kept in memory only")
        }
    }

    func removeCache(_ options: OAuth2Options) {
        unlink(cacheFile(options))
    }
}

/// `task`'s value, or nil as soon as the calling task is cancelled (`task` itself runs on).
func valueUnlessCancelled<Value: Sendable>(_ task: Task<Value, Never>) async -> Value? {
    let once = ResumeOnce<Value?>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            once.set(continuation)
            Task { once.resume(with: await task.value) }
        }
    } onCancel: {
        once.resume(with: nil)
    }
}

/// A continuation resumed by the first of several resumers; a resume before the continuation is set is
/// kept and delivered when it is.
private final class ResumeOnce<Value: Sendable>: Sendable {
    private enum Phase {
        case waiting(CheckedContinuation<Value, Never>?)
        /// Resumed before the continuation was set: its value, for `set`.
        case early(Value)
        case done
    }

    private let phase = Mutex<Phase>(.waiting(nil))

    func set(_ continuation: CheckedContinuation<Value, Never>) {
        let early: Value? = phase.withLock { phase -> Value? in
            switch phase {
            case .early(let value):
                phase = .done
                return value
            case .waiting, .done:
                phase = .waiting(continuation)
                return nil
            }
        }
        // Delivered outside the lock; `Value` may itself be optional, hence the explicit case.
        if case .some(let value) = early { continuation.resume(returning: value) }
    }

    func resume(with value: Value) {
        let continuation: CheckedContinuation<Value, Never>? = phase.withLock { phase in
            switch phase {
            case .waiting(let continuation?):
                phase = .done
                return continuation
            case .waiting(nil):
                phase = .early(value)
                return nil
            case .early, .done:
                return nil
            }
        }
        continuation?.resume(returning: value)
    }
}

private struct CacheFileError: Error, CustomStringConvertible {
    var what: String
    var code: Int32
    var description: String { "\(what): \(String(cString: strerror(code)))" }
}

/// `application/x-www-form-urlencoded`, as HTML forms and RFC 6749 §B write it.
func formEncoded(_ pairs: [(String, String)]) -> String {
    pairs.map { formEncode($0.0) + "=" + formEncode($0.1) }.joined(separator: "&")
}

/// One field's name or value, form-encoded (`PercentEncoding.formEncoded`).
func formEncode(_ text: String) -> String { PercentEncoding.formEncoded(text) }

/// `text` on one line and at most `limit` characters: a server's words in a message.
private func oneLine(_ text: String, limit: Int) -> String {
    let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
    return line.count > limit ? String(line.prefix(limit)) + "…" : line
}


extension Duration {
    /// The duration in seconds, as a Double.
    var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
