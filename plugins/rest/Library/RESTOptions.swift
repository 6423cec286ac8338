import FoundationEssentials
import HammockCore
import HammockJSON
import HammockPluginKit

/// A `rest` source's options, checked once at configure time so that a load never meets a bad option.
struct RESTOptions: Sendable {
    static let keys = [
        "url", "method", "headers", "auth", "query", "body", "parse", "maxBytes", "followRedirects", "paginate", "expose-headers",
    ]
    /// At most this many names in `expose-headers`, and this many bytes of each header's value in `meta`.
    static let maximumExposedHeaders = 32
    static let maximumExposedValue = 1024
    /// The most of the final URL that `meta.url` holds, in bytes.
    static let maximumMetaURL = 8192
    static let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
    static let defaultMaxBytes = 10 << 20

    enum Parse: String, Sendable, CaseIterable {
        /// JSON Lines (`JSONValue.parseLines`): one value per line, as an array.
        case json, jsonl, text
    }

    /// The URL with `query` appended.
    var url: String
    var method: String
    /// In the order written; a header whose value is empty is left out (see `init`).
    var headers: [(name: String, value: String)]
    var body: [UInt8]?
    /// `nil`: by the answer's Content-Type.
    var parse: Parse?
    var maxBytes: Int
    var followRedirects: Bool
    var paginate: Pagination?
    /// Response headers copied into the state's `meta.headers`, lowercased; none unless asked.
    var exposeHeaders: [String]
    /// `auth: { oauth2: ... }`: the Authorization header is a token the plugin gets (see `OAuth2Tokens`).
    var oauth2: OAuth2Options?

    /// What `auth:` asks for: a fixed Authorization header, or OAuth2 tokens.
    enum Auth {
        case header(String)
        case oauth2(OAuth2Options)
    }

    init(_ options: JSONValue) throws(OptionProblems) {
        var reader = OptionReader(options, known: Self.keys, kind: "rest")
        if options.objectValue == nil {
            reader.problem(at: JSONPointer(tokens: []), "the options of a rest source must be a mapping, found \(options.kindName)")
        }
        let rawURL = reader.string("url", required: true)
        if let rawURL, let problem = Self.urlProblem(rawURL) { reader.problem("url", problem) }

        var method = "GET"
        if let text = reader.string("method") {
            if Self.methods.contains(text.uppercased()) {
                method = text.uppercased()
            } else {
                let hint = didYouMean(text, among: Self.methods)
                reader.problem("method", "method must be one of \(Self.methods.joined(separator: ", ")), found \"\(text)\"\(hint)")
            }
        }

        // An empty value leaves the header out, so `X-Token: ${TOKEN:-}` sends nothing rather than an empty
        // header when TOKEN is unset.
        let headers = (reader.stringMap("headers") ?? []).filter { !$0.1.isEmpty }.map { (name: $0.0, value: $0.1) }
        for header in headers {
            if header.name.isEmpty || !header.name.utf8.allSatisfy(isTokenByte) {
                reader.problem(at: JSONPointer(tokens: ["headers", header.name]), "\"\(header.name)\" is not a valid HTTP header name")
            } else if header.value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                // Scalars, not Characters: "\r\n" is one Character, equal to neither "\r" nor "\n". The value
                // itself is never quoted: it may hold a secret.
                reader.problem(at: JSONPointer(tokens: ["headers", header.name]), "the value of header \(header.name) must be one line")
            }
        }
        let auth = Self.readAuth(&reader)
        if auth != nil, headers.contains(where: { $0.name.lowercased() == "authorization" }) {
            reader.problem("auth", "auth and headers.Authorization both set the Authorization header; keep one")
        }
        let query = reader.stringMap("query") ?? []

        var body: [UInt8]?
        var bodyIsJSON = false
        if let value = reader.value("body") {
            switch value {
            case .string(let text): body = Array(text.utf8)
            case .object, .array:
                body = value.jsonBytes
                bodyIsJSON = true
            default:
                reader.problem("body", "body must be a string (sent as it is) or a mapping or list (sent as JSON), found \(value.kindName)")
            }
            if method == "HEAD" { reader.problem("body", "a HEAD request has no body") }
        }

        let parse = reader.choice("parse", Parse.allCases.map(\.rawValue)).flatMap(Parse.init(rawValue:))
        let maxBytes = reader.integer("maxBytes", minimum: 1, size: true) ?? Self.defaultMaxBytes
        let followRedirects = reader.bool("followRedirects") ?? true
        let paginate = Pagination.read(&reader)
        let exposeHeaders = (reader.stringList("expose-headers", nonEmpty: false) ?? []).map { $0.lowercased() }
        if exposeHeaders.count > Self.maximumExposedHeaders {
            reader.problem("expose-headers", "expose-headers names at most \(Self.maximumExposedHeaders) headers, found \(exposeHeaders.count)")
        }
        for (index, name) in exposeHeaders.enumerated() where name.isEmpty || !name.utf8.allSatisfy(isTokenByte) {
            reader.problem(at: JSONPointer(tokens: ["expose-headers", String(index)]), "\"\(name)\" is not a valid HTTP header name")
        }
        if paginate != nil {
            if parse == .text { reader.problem("parse", "parse: text does not work with paginate, which joins JSON arrays") }
            if method == "HEAD" { reader.problem("paginate", "a HEAD request has no pages") }
        }
        try reader.finish()

        var url = rawURL!
        if !query.isEmpty {
            let encoded = query.map { "\($0.0.percentEncodedForURL)=\($0.1.percentEncodedForURL)" }.joined(separator: "&")
            url = url.appendingQuery(encoded)
        }
        var allHeaders = headers
        if case .header(let authorization) = auth { allHeaders.append((name: "Authorization", value: authorization)) }
        if bodyIsJSON && !headers.contains(where: { $0.name.lowercased() == "content-type" }) {
            allHeaders.append((name: "Content-Type", value: "application/json"))
        }
        self.url = url
        self.method = method
        self.headers = allHeaders
        self.body = body
        self.parse = parse
        self.maxBytes = maxBytes
        self.followRedirects = followRedirects
        self.paginate = paginate
        self.exposeHeaders = exposeHeaders
        if case .oauth2(let oauth2) = auth { self.oauth2 = oauth2 }
    }

    /// Why `text` is not an http or https URL, or nil when it is one. `{{ templates }}` (still unfilled when
    /// `hammock check` asks) count as a word, except one that opens the url (`{{ repo.url }}/extra`): its
    /// value supplies the scheme and host, so only the rest can be checked now, and the filled-in url is
    /// checked when the source is configured with it.
    /// `auth: { basic: { username, password } }` or `auth: { bearer: TOKEN }`, as the Authorization header's
    /// value, or `auth: { oauth2: {...} }`. The values are never quoted in a problem: they are secrets (the
    /// loader redacts `${…}` in `auth`).
    static func readAuth(_ reader: inout OptionReader) -> Auth? {
        guard let auth = reader.value("auth") else { return nil }
        let schemes = ["basic", "bearer", "oauth2"]
        guard let members = auth.objectValue, members.count == 1, let (scheme, value) = members.elements.first.map({ ($0.key, $0.value) }) else {
            reader.problem("auth", "auth must be a mapping with one of \(schemes.joined(separator: ", ")), e.g. auth: { bearer: ${TOKEN} }")
            return nil
        }
        let pointer = JSONPointer(tokens: ["auth", scheme])
        switch scheme {
        case "bearer":
            guard let token = value.stringValue else {
                reader.problem(at: pointer, "auth.bearer must be a string (the token)")
                return nil
            }
            // Like an empty header: `bearer: ${TOKEN:-}` sends no Authorization when TOKEN is unset.
            if token.isEmpty { return nil }
            guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                reader.problem(at: pointer, "auth.bearer must be one word of visible ASCII characters")
                return nil
            }
            return .header("Bearer " + token)
        case "oauth2":
            return OAuth2Options.read(value, &reader).map(Auth.oauth2)
        case "basic":
            guard let credentials = value.objectValue else {
                reader.problem(at: pointer, "auth.basic must be a mapping with username and password")
                return nil
            }
            for key in credentials.keys where key != "username" && key != "password" {
                let hint = didYouMean(key, among: ["username", "password"])
                reader.problem(at: JSONPointer(tokens: ["auth", "basic", key]), "unknown key \"\(key)\" in auth.basic\(hint)")
            }
            guard let username = credentials["username"]?.stringValue else {
                reader.problem(at: pointer, "auth.basic needs username (a string)")
                return nil
            }
            let password = credentials["password"]?.stringValue ?? ""
            if credentials["password"] != nil && credentials["password"]?.stringValue == nil {
                reader.problem(at: JSONPointer(tokens: ["auth", "basic", "password"]), "auth.basic.password must be a string")
                return nil
            }
            // RFC 7617: the first colon ends the user-id, so one inside it would move the split.
            if username.contains(":") {
                reader.problem(at: JSONPointer(tokens: ["auth", "basic", "username"]), "auth.basic.username may not contain \":\"")
                return nil
            }
            let pair = (username + ":" + password).unicodeScalars
            if pair.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                reader.problem(at: pointer, "auth.basic's username and password may not hold control characters")
                return nil
            }
            return .header("Basic " + Data((username + ":" + password).utf8).base64EncodedString())
        default:
            let hint = didYouMean(scheme, among: schemes)
            reader.problem(at: JSONPointer(tokens: ["auth", scheme]), "unknown auth scheme \"\(scheme)\"\(hint); use basic, bearer or oauth2")
            return nil
        }
    }

    static func urlProblem(_ text: String) -> String? {
        var candidate = text
        let opensWithTemplate = text.hasPrefix("{{")
        while let open = candidate.firstRange(of: "{{"), let close = candidate[open.upperBound...].firstRange(of: "}}") {
            candidate.replaceSubrange(open.lowerBound..<close.upperBound, with: "x")
        }
        guard !candidate.isEmpty else { return "url must not be empty" }
        if candidate.unicodeScalars.contains(where: { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }) {
            return "url must not contain spaces (write them as %20)"
        }
        if opensWithTemplate { return nil }
        guard let components = URLComponents(string: candidate), let scheme = components.scheme?.lowercased() else {
            return "url \"\(text)\" is not a URL (expected http://… or https://…)"
        }
        guard scheme == "http" || scheme == "https" else {
            return "url must start with http:// or https://, found \"\(scheme):\""
        }
        guard let host = components.host, !host.isEmpty else { return "url \"\(text)\" has no host" }
        return nil
    }
}

/// `paginate:` — how to walk the pages of a list.
struct Pagination: Sendable {
    enum Style: Sendable {
        /// Follow `Link: <…>; rel="next"`.
        case link
        /// `?page=1`, `?page=2`, … until a page is shorter than `size` (or empty).
        case page(param: String, start: Int, sizeParam: String?, size: Int?)
    }

    static let keys = ["style", "param", "start", "sizeParam", "size", "limit", "maxPages", "lazy"]
    static let defaultMaxPages = 100
    /// The largest `start`, `size`, `limit` or `maxPages`: far beyond any real list.
    static let largestNumber = 1_000_000_000

    var style: Style
    /// At most this many items in all.
    var limit: Int?
    /// A guard against a server that never stops handing out pages.
    var maxPages: Int
    /// Load the first page only, and more as the consumer asks (`more`); a refresh loads as many as were
    /// asked for.
    var lazy: Bool = false

    static func read(_ reader: inout OptionReader) -> Pagination? {
        guard let value = reader.value("paginate") else { return nil }
        guard let object = value.objectValue else {
            reader.problem("paginate", "paginate must be a mapping such as { style: link } or { style: page, param: page }, found \(value.kindName)")
            return nil
        }
        func at(_ key: String) -> JSONPointer { JSONPointer(tokens: ["paginate", key]) }
        for key in object.keys where !keys.contains(key) {
            reader.problem(at: at(key), unknownKeyMessage(key, known: keys, context: "paginate"))
        }
        func string(_ key: String) -> String? {
            guard let item = object[key] else { return nil }
            guard let text = item.stringValue, !text.isEmpty else {
                reader.problem(at: at(key), "paginate.\(key) must be a non-empty string, found \(item.kindName)")
                return nil
            }
            return text
        }
        // Bounded, so that counting pages up from `start` can never overflow, whatever the file says.
        func integer(_ key: String, minimum: Int) -> Int? {
            guard let item = object[key] else { return nil }
            guard let number = item.numberValue?.intValue, (minimum...largestNumber).contains(number) else {
                reader.problem(at: at(key), "paginate.\(key) must be a whole number from \(minimum) to \(largestNumber)")
                return nil
            }
            return number
        }
        let limit = integer("limit", minimum: 1)
        let maxPages = integer("maxPages", minimum: 1) ?? defaultMaxPages
        var lazy = false
        if let item = object["lazy"] {
            if let flag = item.boolValue { lazy = flag } else { reader.problem(at: at("lazy"), "paginate.lazy must be true or false, found \(item.kindName)") }
        }
        guard let styleName = string("style") else {
            if object["style"] == nil { reader.problem(at: JSONPointer(tokens: ["paginate"]), "paginate needs a style: link or page") }
            return nil
        }
        switch styleName {
        case "link":
            for key in ["param", "start", "sizeParam", "size"] where object[key] != nil {
                reader.problem(at: at(key), "paginate.\(key) is for style: page; style: link follows the Link header")
            }
            return Pagination(style: .link, limit: limit, maxPages: maxPages, lazy: lazy)
        case "page":
            let param = string("param") ?? "page"
            let start = integer("start", minimum: 0) ?? 1
            let sizeParam = string("sizeParam")
            let size = integer("size", minimum: 1)
            if sizeParam != nil && size == nil {
                reader.problem(at: at("sizeParam"), "paginate.sizeParam needs paginate.size, the page size to ask for")
            }
            return Pagination(
                style: .page(param: param, start: start, sizeParam: sizeParam, size: size), limit: limit, maxPages: maxPages, lazy: lazy)
        default:
            let hint = didYouMean(styleName, among: ["link", "page"])
            reader.problem(at: at("style"), "paginate.style must be link or page, found \"\(styleName)\"\(hint)")
            return nil
        }
    }
}

/// RFC 9110 `token` characters, the ones a header name is made of.
private func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        return true
    default:
        return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
    }
}

extension String {
    /// Adds `query` (already encoded) to the URL's query, before any `#fragment`.
    func appendingQuery(_ query: String) -> String {
        let (base, fragment) = splitFragment()
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return base + separator + query + fragment
    }

    /// Sets `name=value` in the URL's query, replacing the parameter if it is there already.
    func settingQueryParameter(_ name: String, to value: String) -> String {
        let (base, fragment) = splitFragment()
        let encodedName = name.percentEncodedForURL
        let pair = encodedName + "=" + value.percentEncodedForURL
        guard let question = base.firstIndex(of: "?") else { return base + "?" + pair + fragment }
        var parameters = base[base.index(after: question)...].split(separator: "&", omittingEmptySubsequences: true).map(String.init)
        parameters.removeAll { $0 == encodedName || $0.hasPrefix(encodedName + "=") || $0 == name || $0.hasPrefix(name + "=") }
        parameters.append(pair)
        return String(base[..<question]) + "?" + parameters.joined(separator: "&") + fragment
    }

    private func splitFragment() -> (String, String) {
        guard let hash = firstIndex(of: "#") else { return (self, "") }
        return (String(self[..<hash]), String(self[hash...]))
    }
}
