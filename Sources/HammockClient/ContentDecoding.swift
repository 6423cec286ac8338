import HammockJSON

/// Turns a source's or view's JSON content into the consumer's type, line after line.
///
/// Content of the wrong shape never traps: it becomes a `LoadError` with code `decodingFailed` whose message
/// names the member that did not match. The last content that did decode stays, as Siesta keeps stale
/// content when a load fails: a screen keeps showing good data while it shows the error, and the error clears
/// by itself once content of the right shape comes.
///
/// Which error a state shows when both the engine and the decoding have one: whichever is newer. A line
/// whose content changed and does not decode makes the decoding failure the news; a later failed load (the
/// engine's `latestError` changing) is newer than that.
struct ContentDecoding<Content: Decodable & Sendable>: Sendable {
    private var decodedJSON: JSONValue?
    private(set) var content: Content?
    private var decodingFailure: LoadError?
    private var engineError: LoadError?
    private var engineErrorIsNewer = false

    init() {}

    /// Takes the line's content and engine error; returns the content and error the typed state shows.
    mutating func update(content json: JSONValue?, engineError newEngineError: LoadError?) -> (
        content: Content?, latestError: LoadError?
    ) {
        if json != decodedJSON {
            decodedJSON = json
            engineErrorIsNewer = false
            if let json {
                do {
                    content = try JSONValueDecoder().decode(Content.self, from: json)
                    decodingFailure = nil
                } catch {
                    decodingFailure = Self.failure(error)
                }
            } else {
                // No content (none yet, or wiped): nothing stale to keep.
                content = nil
                decodingFailure = nil
            }
        }
        if newEngineError != engineError {
            engineError = newEngineError
            if newEngineError != nil { engineErrorIsNewer = true }
        }
        guard let decodingFailure else { return (content, engineError) }
        return (content, engineErrorIsNewer ? engineError ?? decodingFailure : decodingFailure)
    }

    static func failure(_ error: any Error) -> LoadError {
        let reason =
            if let error = error as? DecodingError { error.summary(whole: "the content") } else { "\(error)" }
        return LoadError(message: "content is not a \(Content.self): \(reason)", code: LoadError.decodingFailed)
    }
}
