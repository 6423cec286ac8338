import HammockJSON
import OrderedCollections

/// The state machine of one source: Siesta's resource state, moved only by `SourceEvent`s.
///
/// This file is the whole of it. Everything else (freshness, scheduling, views, output) reads this state;
/// nothing else writes it.
public struct SourceState: Sendable, Hashable {
    /// The latest data. `nil` before the first data (and after a wipe); a source whose data *is* JSON `null`
    /// holds `.null` here, and counts as having content.
    public var content: JSONValue?
    /// The latest failure. It never clears `content`: stale data stays while the error is shown.
    public var latestError: SourceError?
    /// Whether a load is in flight. In the engine it is derived from the source's `LoadPhase`, never set
    /// beside it; `apply` keeps Siesta's table for a state held anywhere else (a test, a client's mirror).
    public var isLoading: Bool
    /// Time of the latest data, not-modified answer or error.
    public var timestamp: Timestamp?
    /// Consecutive failed loads.
    public var failures: Int
    /// What the answer that brought `content` said of it besides the content (Siesta's `Entity` headers):
    /// for a rest source its HTTP status, ETag, Content-Type, final URL; for a command its exit status and
    /// duration; for a file its size and modification time. Each kind says what it puts here. `nil` when
    /// the loader said nothing, and for content that did not come from a loader (cache, override, wipe).
    public var meta: JSONObject?

    public init(
        content: JSONValue? = nil, latestError: SourceError? = nil, isLoading: Bool = false,
        timestamp: Timestamp? = nil, failures: Int = 0, meta: JSONObject? = nil
    ) {
        self.content = content
        self.latestError = latestError
        self.isLoading = isLoading
        self.timestamp = timestamp
        self.failures = failures
        self.meta = meta
    }

    /// Applies Siesta's event table.
    ///
    /// - Parameter otherLoadsInFlight: whether another load of the same source is still running once this
    ///   event's own load is accounted for; a finished load only clears `isLoading` when it was the last.
    /// - Parameter meta: what the loader said of its answer. New data from a loader replaces `meta` with it
    ///   (nil when the loader said nothing: the old words described the old content); a not-modified answer
    ///   updates the members it names and keeps the rest (a 304 says nothing of the pages, say); an error
    ///   keeps `meta`, as it keeps the content; content set by the consumer or the cache has none.
    public mutating func apply(_ event: SourceEvent, at now: Timestamp, otherLoadsInFlight: Bool, meta: JSONObject? = nil) {
        switch event {
        case .newData(_, origin: .load), .newData(_, origin: .push):
            self.meta = meta
        case .newData:
            self.meta = nil
        case .notModified:
            if let meta { self.meta = Self.merged(self.meta, with: meta) }
        case .requested, .requestCancelled, .error:
            break
        }
        switch event {
        case .requested:
            isLoading = true
        case .requestCancelled:
            isLoading = otherLoadsInFlight
        case .newData(let newContent, origin: .wipe):
            // A wipe forgets everything, including when the data arrived, so the next `loadIfNeeded` loads.
            _ = newContent
            content = nil
            latestError = nil
            timestamp = nil
            failures = 0
            isLoading = otherLoadsInFlight
        case .newData(let newContent, origin: _):
            content = newContent
            latestError = nil
            failures = 0
            timestamp = now
            isLoading = otherLoadsInFlight
        case .notModified:
            latestError = nil
            failures = 0
            timestamp = now
            isLoading = otherLoadsInFlight
        case .error(let error):
            latestError = error
            failures += 1
            timestamp = now
            isLoading = otherLoadsInFlight
        }
    }

    public var hasContent: Bool { content != nil }

    /// The longest `meta` a state keeps, in bytes once encoded: it is written on every line of its source.
    public static let maximumMetaLength = 64 << 10

    /// What a not-modified answer's `meta` makes of the state's: each member it names replaces the old one,
    /// except that an object merges member by member (a 304 that names one exposed header keeps the others);
    /// the rest stays. When that would pass `maximumMetaLength` (a plugin naming new members on every
    /// answer), the newest meta stands alone.
    static func merged(_ old: JSONObject?, with new: JSONObject) -> JSONObject {
        var merged = old ?? [:]
        for (key, value) in new {
            if case .object(let inner)? = merged[key], case .object(let newer) = value {
                merged[key] = .object(inner.merging(newer) { _, latest in latest })
            } else {
                merged[key] = value
            }
        }
        return JSONValue.object(merged).jsonBytes.count > maximumMetaLength ? new : merged
    }
}

/// What moves a source's state.
public enum SourceEvent: Sendable, Hashable {
    case requested
    case requestCancelled
    case newData(JSONValue, origin: DataOrigin)
    case notModified
    case error(SourceError)

    /// The name that stands in the `event` field of an output line.
    public var name: String {
        switch self {
        case .requested: "requested"
        case .requestCancelled: "requestCancelled"
        case .newData: "newData"
        case .notModified: "notModified"
        case .error: "error"
        }
    }

    public var origin: DataOrigin? {
        if case .newData(_, let origin) = self { return origin }
        return nil
    }
}

/// Where new data came from.
public enum DataOrigin: String, Sendable, Hashable, CaseIterable {
    /// The answer to a load.
    case load
    /// The plugin noticed a change by itself: a watched file, a line from a streaming command.
    case push
    /// Restored from disk at start.
    case cache
    /// Set by the consumer.
    case override
    /// Cleared by the consumer.
    case wipe
}

/// A failure, as the consumer sees it.
public struct SourceError: Sendable, Hashable, Error {
    public var message: String
    public var httpStatus: Int?
    public var exitStatus: Int?
    /// A short machine-readable cause: one of `Code`'s members, or any code a plugin defines.
    public var code: Code?
    /// When the failing side asked for the next attempt (HTTP `Retry-After`). Steers the engine's retry;
    /// never written on an output line.
    public var retryAfter: Duration?
    /// What the failing side said of retrying (the protocol's `transient`); `nil` lets `isTransient` decide
    /// from the status and the code.
    public var transient: Bool?
    /// When the failing side said it may be asked again (`retryAfter` from the moment the error came: a
    /// `Retry-After`, a rate limit's reset), for the consumer: written as `retryAt` beside the message.
    public var retryAt: Timestamp?

    public init(
        message: String, httpStatus: Int? = nil, exitStatus: Int? = nil, code: Code? = nil,
        retryAfter: Duration? = nil, transient: Bool? = nil, retryAt: Timestamp? = nil
    ) {
        self.message = message
        self.httpStatus = httpStatus
        self.exitStatus = exitStatus
        self.code = code
        self.retryAfter = retryAfter
        self.transient = transient
        self.retryAt = retryAt
    }

    /// Whether trying again, unchanged, can cure the failure, so the engine retries it by itself with
    /// backoff: a network failure, a timeout, HTTP 5xx, 408, 425 and 429, a command's non-zero exit, a
    /// crashed plugin. An HTTP 4xx, an answer that does not parse, a `select` or template path that points
    /// nowhere, a missing file or command would fail the same way again: they wait for the next refresh, a
    /// control line, or a change of input.
    public var isTransient: Bool {
        if let transient { return transient }
        if let httpStatus, httpStatus >= 400 { return httpStatus >= 500 || [408, 425, 429].contains(httpStatus) }
        return !(code?.isPermanent ?? false)
    }

    /// The longest message a consumer is shown, in Unicode scalars. Plugins pass a server's or a command's
    /// words on at length (the rest plugin up to 4 KiB, the shell plugin the last 2 KiB of stderr) because
    /// only the engine knows the secrets: it redacts first and shortens after, so a cut never leaves the first
    /// characters of a secret behind. Long enough for a command's stderr tail, short enough for a status line.
    public static let displayedMessageLimit = 2048

    /// `json` as a consumer sees it: every string redacted, then the message shortened.
    public func displayed(redactor: Redactor) -> JSONValue {
        let redacted = redactor.redact(json)
        guard case .object(var object) = redacted, let message = object["message"]?.stringValue,
            message.unicodeScalars.count > Self.displayedMessageLimit
        else { return redacted }
        let kept = message.unicodeScalars.prefix(Self.displayedMessageLimit)
        object["message"] = .string(String(String.UnicodeScalarView(kept)) + "…")
        return .object(object)
    }

    public var json: JSONValue {
        var object: JSONObject = ["message": .string(message)]
        if let httpStatus { object["httpStatus"] = .number(JSONNumber(httpStatus)) }
        if let exitStatus { object["exitStatus"] = .number(JSONNumber(exitStatus)) }
        if let code { object["code"] = .string(code.rawValue) }
        if let retryAt { object["retryAt"] = .string(retryAt.rfc3339) }
        return .object(object)
    }
}

extension SourceError {
    /// A failure's cause in a word, written on the wire as that word (`"code": "timeout"`). The members are
    /// the codes hammock itself writes or decides on; a plugin may send any other word, and declares its own
    /// as `extension SourceError.Code { static let rateLimited = Self("rateLimited") }`.
    public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public let rawValue: String

        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }

        public var description: String { rawValue }

        /// Whether the failure happens again, the same, until something changes, so retrying it unchanged is
        /// pointless (see `SourceError.isTransient`).
        public var isPermanent: Bool { Self.permanent.contains(self) }

        /// Codes of failures that happen again, the same, until something changes.
        public static let permanent: Set<Code> = [
            .parseFailed, .selectMissing, .templateUnresolved, .inputFailed, .invalidOptions, .notModifiedWithoutContent,
            .fileMissing, .commandNotFound, .badWorkingDirectory, .tooManyRedirects, .outputTooLarge, .tooLarge,
        ]

        // Decided by the engine.
        /// A load took longer than the source's `timeout`.
        public static let timeout = Code("timeout")
        /// A `{{ template }}` in the options points at nothing in its input's content.
        public static let templateUnresolved = Code("templateUnresolved")
        /// `select` points at nothing in the loaded content.
        public static let selectMissing = Code("selectMissing")
        /// An input the source's templates read has no content.
        public static let inputFailed = Code("inputFailed")
        /// The plugin refused the source's options.
        public static let invalidOptions = Code("invalidOptions")
        /// The plugin answered `notModified` to a load that had nothing to keep.
        public static let notModifiedWithoutContent = Code("notModifiedWithoutContent")
        /// The plugin crashed, wrote a line that is not protocol, or wrote one over the line limit.
        public static let pluginFailed = Code("pluginFailed")
        /// The plugin failed too often and is not restarted.
        public static let pluginGaveUp = Code("pluginGaveUp")
        /// The plugin did not answer a `configure` in time.
        public static let pluginTimeout = Code("pluginTimeout")
        /// A message or content over a size limit.
        public static let tooLarge = Code("tooLarge")

        // Written by plugins, with a meaning hammock knows.
        /// The loaded bytes are not in the expected format.
        public static let parseFailed = Code("parseFailed")
        /// The load was cancelled.
        public static let cancelled = Code("cancelled")
        /// A file to read does not exist.
        public static let fileMissing = Code("fileMissing")
        /// A command to run does not exist.
        public static let commandNotFound = Code("commandNotFound")
        /// A command's working directory does not exist.
        public static let badWorkingDirectory = Code("badWorkingDirectory")
        /// A command wrote more than it may.
        public static let outputTooLarge = Code("outputTooLarge")
        /// An HTTP answer redirected more often than allowed.
        public static let tooManyRedirects = Code("tooManyRedirects")
    }
}
