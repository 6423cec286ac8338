import HammockJSON

/// What the loader said of a source's answer besides its content (`meta` on the wire, Siesta's entity
/// headers): a rest source's HTTP status, validators, type and final URL, the headers it exposes and, when
/// paginated, its pages; a shell source's exit status and run time; a file source's size and change time.
/// Each kind says what it puts here (docs/protocol.md); `values` holds all of it, the properties read the
/// shipped kinds' members.
public struct SourceMeta: Sendable, Hashable {
    /// Everything the loader said, as it said it.
    public var values: JSONObject

    public init(_ values: JSONObject) { self.values = values }

    public subscript(key: String) -> JSONValue? { values[key] }

    /// rest: the answer's HTTP status (304 after a not-modified answer).
    public var httpStatus: Int? { values["httpStatus"]?.numberValue?.intValue }
    /// rest: the answer's ETag.
    public var etag: String? { values["etag"]?.stringValue }
    /// rest: the answer's Last-Modified.
    public var lastModified: String? { values["lastModified"]?.stringValue }
    /// rest: the answer's Content-Type.
    public var contentType: String? { values["contentType"]?.stringValue }
    /// rest: where the answer came from, after redirects.
    public var url: String? { values["url"]?.stringValue }
    /// rest: the response headers the source names in `expose-headers`, by lowercased name.
    public var headers: [String: String] {
        guard let object = values["headers"]?.objectValue else { return [:] }
        var headers: [String: String] = [:]
        for (name, value) in object { if let text = value.stringValue { headers[name] = text } }
        return headers
    }
    /// rest with `paginate`: how many pages the content joins.
    public var pages: Int? { values["pages"]?.numberValue?.intValue }
    /// rest with `paginate`: whether the server has pages after these; `more()` loads them.
    public var hasMore: Bool { values["hasMore"]?.boolValue ?? false }
    /// shell: the command's exit status.
    public var exitStatus: Int? { values["exitStatus"]?.numberValue?.intValue }
}
