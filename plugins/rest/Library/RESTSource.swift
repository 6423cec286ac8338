import FoundationEssentials
import HammockCore
import HammockJSON
import HammockPluginKit
import NIOCore
import NIOHTTP1
import Synchronization

/// One configured `rest` source. Stateless between loads: what the engine remembers (ETag, Last-Modified)
/// comes back in the load request.
struct RESTSource: PluginSource {
    let id: String
    let options: RESTOptions
    let client: SharedHTTPClient
    /// Every origin's rate limit, shared by the plugin's sources.
    let limits: RateLimits
    /// The OAuth2 tokens of the plugin's sources (`auth: { oauth2 }`), shared like `limits`.
    let tokens: OAuth2Tokens
    /// The event loop this source's loads run on.
    let loop: LoadLoop
    /// A paginated source's pages as last read, with their validators.
    let pages = PageMemory()
    /// The configured URL as every poll's request needs it, parsed once here rather than at each poll.
    let configuredURL: ParsedURL
    var loadExecutor: (any TaskExecutor)? { loop.executor }

    /// When the engine gives no timeout (it always does).
    static let defaultTimeout: Duration = .seconds(30)
    static let maximumRedirects = 10
    /// Enough of an error answer to find its message in.
    static let errorBodyLimit = 64 << 10
    /// A body larger than this is parsed off the event loop (see `parse`).
    static let largeBody = 256 << 10
    static let userAgent = "hammock-plugin-rest/\(RESTPlugin.version)"

    func load(_ request: PluginLoadRequest) async -> PluginLoadResult {
        let timeout = request.timeout ?? Self.defaultTimeout
        let deadline = ContinuousClock.now + timeout
        // The client's own deadline covers the answer's head only; this one also covers reading the body,
        // every page and every redirect. The work runs in a task of its own so that the deadline (one timer
        // of the event loop for all its loads, see `LoadDeadlines`) can cancel it; awaited just below.
        let work = Task(executorPreference: loop.executor) { await self.perform(request, deadline: deadline) }
        let watch = loop.deadlines.watch(work, until: nioDeadline(deadline))
        let result = await withTaskCancellationHandler {
            await work.value
        } onCancel: {
            work.cancel()
        }
        loop.deadlines.unwatch(watch)
        if Task.isCancelled { return .error(SourceError(message: "the load was cancelled", code: .cancelled)) }
        if case .error = result, ContinuousClock.now >= deadline {
            return .error(
                SourceError(
                    message: "timeout: no complete answer from \(hostDescription(options.url)) within \(timeout.humanReadable)",
                    code: .timeout))
        }
        // A token the plugin obtained is a secret the engine does not know of: a server may quote it back
        // (in content, an error's message, a header value used as an ETag), so nothing leaves unredacted.
        return redacted(result, by: tokens.redactor)
    }

    /// A log line, with the plugin's OAuth2 tokens redacted.
    private func log(_ message: String) {
        pluginLog(tokens.redactor.redact(message))
    }

    private func perform(_ request: PluginLoadRequest, deadline: ContinuousClock.Instant) async -> PluginLoadResult {
        guard let pagination = options.paginate else {
            switch await fetch(options.url, etag: request.etag, lastModified: request.lastModified, deadline: deadline) {
            case .notModified(let freshFor, let meta):
                return PluginLoadResult.notModified.meta(meta).fresh(for: freshFor)
            case .failure(let error):
                return .error(error)
            case .answer(let answer):
                let fresh = answer.freshFor
                let meta = answer.meta(exposing: options.exposeHeaders)
                if options.method == "HEAD" { return PluginLoadResult.newData(answer.headContent).meta(meta).fresh(for: fresh) }
                switch await parse(answer) {
                case .success(let content):
                    return PluginLoadResult.newData(
                        content, etag: answer.headers.first(name: "etag"), lastModified: answer.headers.first(name: "last-modified")
                    ).meta(meta).fresh(for: fresh).stored(!forbidsStoring(answer.headers))
                case .failure(let error):
                    return .error(error)
                }
            }
        }
        return await paginate(pagination, request: request, deadline: deadline)
    }

    /// Parses an answer's body. A large one is parsed on the concurrency pool: the event loop the load runs
    /// on also carries other sources' requests, which must not wait behind a long parse.
    private func parse(_ answer: Answer) async -> Result<JSONValue, SourceError> {
        let contentType = answer.headers.first(name: "content-type")
        guard answer.body.count > Self.largeBody else { return parseContent(answer.body, contentType: contentType, as: options.parse) }
        return await withTaskExecutorPreference(globalConcurrentExecutor) {
            parseContent(answer.body, contentType: contentType, as: options.parse)
        }
    }

    // MARK: Pagination

    /// Walks the pages and joins their arrays: all of them (up to `limit` and `maxPages`), or with `lazy: true`
    /// as many as the engine asks for (`request.pages`, 1 unless the consumer sent `more`).
    ///
    /// Every page goes with the validators its last answer gave (`PageMemory`), so a refresh of a long list
    /// costs a 304 per page where the server supports it, and a list whose every page is unchanged is
    /// `notModified`. The first page also carries the engine's validators, as a one-page list always has.
    private func paginate(_ pagination: Pagination, request: PluginLoadRequest, deadline: ContinuousClock.Instant) async -> PluginLoadResult {
        let wanted = pagination.lazy ? min(max(request.pages ?? 1, 1), pagination.maxPages) : pagination.maxPages
        let remembered = pages.take()
        var read: [PageMemory.Page] = []
        var items: [JSONValue] = []
        var url = options.url
        var pageNumber = 0
        if case .page(let param, let start, let sizeParam, let size) = pagination.style {
            pageNumber = start
            url = url.settingQueryParameter(param, to: String(start))
            if let sizeParam, let size { url = url.settingQueryParameter(sizeParam, to: String(size)) }
        }
        var visited: Set<String> = [url]
        var firstPageCount: Int?
        var meta: JSONObject = [:]
        var freshFor: Duration?
        var hasMore = false
        var unchanged = true
        // A page that said `no-store` keeps the whole list off the disk.
        var noStore = false
        for pageIndex in 1... {
            let isFirst = pageIndex == 1
            let known = remembered[url]
            let outcome = await fetch(
                url, etag: known?.etag ?? (isFirst ? request.etag : nil),
                lastModified: known?.lastModified ?? (isFirst ? request.lastModified : nil), deadline: deadline)
            var page: PageMemory.Page
            switch outcome {
            case .notModified(let fresh, let answerMeta):
                if isFirst {
                    freshFor = fresh
                    // What the 304 says over what the page's last full answer said (its type, its date).
                    meta = (known?.meta ?? [:]).merging(answerMeta) { _, new in new }
                }
                guard let known else {
                    // Only the engine's validators went with it: the one-page list the engine holds is unchanged.
                    if isFirst { return PluginLoadResult.notModified.meta(answerMeta).fresh(for: fresh) }
                    return .error(SourceError(message: "page \(pageIndex) answered 304 Not Modified to a plain request", httpStatus: 304))
                }
                page = known
                if known.noStore { noStore = true }
            case .failure(var error):
                if !isFirst { error.message = "page \(pageIndex): " + error.message }
                return .error(error)
            case .answer(let answer):
                unchanged = false
                if forbidsStoring(answer.headers) { noStore = true }
                if isFirst {
                    freshFor = answer.freshFor
                    meta = answer.meta(exposing: options.exposeHeaders)
                }
                switch await parse(answer) {
                case .failure(var error):
                    error.message = "page \(pageIndex): " + error.message
                    return .error(error)
                case .success(let content):
                    guard let array = content.arrayValue else {
                        return .error(
                            SourceError(
                                message: "page \(pageIndex) is \(content.kindName), not a list: paginate joins JSON arrays",
                                code: .parseFailed))
                    }
                    page = PageMemory.Page(
                        items: array, etag: answer.headers.first(name: "etag"), lastModified: answer.headers.first(name: "last-modified"),
                        noStore: forbidsStoring(answer.headers))
                }
                switch pagination.style {
                case .link:
                    if let target = nextLink(in: answer.headers["link"]) {
                        // The server names the next page, so it is checked like a redirect's Location: http(s)
                        // only (the client takes nothing else, and a clear error is better here). Another
                        // origin is fetched without the configured headers (see `headers(for:)`).
                        guard let resolved = URL(string: target, relativeTo: URL(string: answer.url))?.absoluteURL,
                            let scheme = resolved.scheme?.lowercased(), scheme == "http" || scheme == "https"
                        else {
                            return .error(
                                SourceError(
                                    message: "page \(pageIndex) links its next page to \"\(target)\", which is not an http(s) URL",
                                    code: .badLink, transient: false))
                        }
                        page.next = resolved.absoluteString
                    }
                case .page(let param, _, _, let size):
                    let expected = size ?? firstPageCount ?? 0
                    if !page.items.isEmpty && page.items.count >= expected {
                        page.next = url.settingQueryParameter(param, to: String(pageNumber + 1))
                    }
                }
            }
            if isFirst { firstPageCount = page.items.count }
            page.url = url
            page.meta = isFirst ? meta : nil
            read.append(page)
            items += page.items
            // At the limit the source holds all it wants: nothing more to load (`hasMore` stays false).
            if let limit = pagination.limit, items.count >= limit {
                items.removeLast(items.count - limit)
                break
            }
            guard let next = page.next else { break }
            guard visited.insert(next).inserted else {
                log("source \"\(id)\": page \(pageIndex) points back to a page already read; stopping there")
                break
            }
            if pageIndex >= wanted {
                hasMore = true
                if !pagination.lazy {
                    log("source \"\(id)\": stopped after \(pageIndex) pages (paginate.maxPages); the list may be incomplete")
                }
                break
            }
            url = next
            pageNumber += 1
        }
        pages.keep(read)
        meta["pages"] = .number(JSONNumber(read.count))
        meta["hasMore"] = .bool(hasMore)
        // A list that fit on one page carries that page's validators to the engine. A longer one carries a
        // validator of its own, made of every page's (`PageMemory.listTag`): the engine sends it back only
        // while it holds the list it came with (a wipe forgets it), so when it comes back and every page
        // answered 304 to its own validators, the engine's list is the server's, unchanged.
        if read.count == 1 {
            // The engine holds this very page when it sent back the validators the page answered 304 to.
            let held = (request.etag != nil || request.lastModified != nil)
                && request.etag == read[0].etag && request.lastModified == read[0].lastModified
            if unchanged && held { return PluginLoadResult.notModified.meta(meta).fresh(for: freshFor) }
            return PluginLoadResult.newData(.array(items), etag: read[0].etag, lastModified: read[0].lastModified).meta(meta)
                .fresh(for: freshFor).stored(!noStore)
        }
        let listTag = PageMemory.listTag(of: read)
        if unchanged, let listTag, request.etag == listTag {
            return PluginLoadResult.notModified.meta(meta).fresh(for: freshFor)
        }
        return PluginLoadResult.newData(.array(items), etag: listTag).meta(meta).fresh(for: freshFor).stored(!noStore)
    }

    // MARK: One request

    struct Answer {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var body: [UInt8]
        /// Where the answer came from, after redirects.
        var url: String
        /// How long to wait before asking again, for the origin's rate limit to last until its reset.
        var spread: Duration? = nil

        /// How long the server, and its rate limit, say this answer stays fresh.
        var freshFor: Duration? { freshness(headers, spread: spread) }

        /// The state's `meta` for this answer: its status, validators, type, final URL and the headers the
        /// source exposes.
        func meta(exposing names: [String]) -> JSONObject {
            var meta = answerMeta(status: status, headers: headers, url: url, exposing: names)
            if let type = headers.first(name: "content-type") { meta["contentType"] = .string(prefix(type, bytes: RESTOptions.maximumExposedValue)) }
            return meta
        }

        /// What a HEAD request yields: the status and the headers.
        var headContent: JSONValue {
            var fields: [(String, JSONValue)] = []
            for (name, value) in headers {
                let key = name.lowercased()
                if let index = fields.firstIndex(where: { $0.0 == key }), let previous = fields[index].1.stringValue {
                    fields[index].1 = .string(previous + ", " + value)
                } else {
                    fields.append((key, .string(value)))
                }
            }
            var headerObject: JSONValue = [:]
            for (key, value) in fields { headerObject = headerObject.setting(key, value) }
            return ["status": .number(JSONNumber(Int(status.code))), "headers": headerObject]
        }
    }

    enum Outcome {
        case answer(Answer)
        /// A 304: how long its headers (and the origin's rate limit) say the kept content stays fresh, and
        /// what it says of the kept content (`meta`, the members a 304 carries).
        case notModified(freshFor: Duration?, meta: JSONObject)
        case failure(SourceError)
    }

    /// Sends one request (following redirects) and reads a successful answer's body within `maxBytes`.
    private func fetch(_ startURL: String, etag: String?, lastModified: String?, deadline: ContinuousClock.Instant) async -> Outcome {
        var url = startURL
        var method = HTTPMethod(rawValue: options.method)
        var body = options.body
        var bodyDropped = false

        let http = self.client.get()
        var token: String?
        if let oauth2 = options.oauth2 {
            switch await tokens.token(for: oauth2, client: http) {
            case .success(let obtained): token = obtained
            case .failure(let error): return .failure(error)
            }
        }
        var replayed = false
        var redirects = 0
        while true {
            var request = HTTP1Request(url: url, method: method)
            request.headers = headers(for: url, bodyDropped: bodyDropped, etag: etag, lastModified: lastModified, token: token)
            request.body = body
            // A 2xx answer's body whole within maxBytes; of any other, enough for its message (a redirect's
            // or a 304's is read to its end within that, so that the connection is kept).
            request.bodyLimit = .init(bytes: options.maxBytes, truncating: false)
            request.otherBodyLimit = .init(bytes: Self.errorBodyLimit, truncating: true)
            let parsed = url == configuredURL.url ? configuredURL : ParsedURL(url)
            request.target = parsed.target
            // A URL that does not parse is its own origin for the rate limits (its request fails anyway).
            let requestOrigin = parsed.origin ?? url
            if let held = limits.hold(requestOrigin, host: parsed.host, for: id) { return .failure(held) }
            let response: HTTP1Response
            do {
                response = try await http.execute(request, deadline: nioDeadline(deadline), on: loop.eventLoop)
            } catch {
                return .failure(describe(error, url: url, deadline: deadline))
            }
            let status = response.status
            let (spread, heldFor) = limits.record(RateLimitHeaders(response.headers), origin: requestOrigin)

            if [301, 302, 303, 307, 308].contains(status.code), let location = response.headers.first(name: "location") {
                guard options.followRedirects else {
                    return .failure(
                        SourceError(
                            message: "HTTP \(status.code) \(status.reasonPhrase): a redirect, not followed (followRedirects is false)",
                            httpStatus: Int(status.code)))
                }
                redirects += 1
                guard redirects <= Self.maximumRedirects else {
                    return .failure(SourceError(message: "more than \(Self.maximumRedirects) redirects, starting at \(startURL)", code: .tooManyRedirects))
                }
                guard let target = URL(string: location, relativeTo: URL(string: url))?.absoluteURL,
                    let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https"
                else {
                    return .failure(SourceError(message: "HTTP \(status.code): a redirect to \"\(location)\", which is not an http(s) URL", httpStatus: Int(status.code)))
                }
                // 303, and 301/302 after a POST (as browsers do), turn into a GET without a body.
                if status.code == 303 || ((status.code == 301 || status.code == 302) && method == .POST) {
                    if method != .HEAD { method = .GET }
                    body = nil
                    bodyDropped = true
                }
                url = target.absoluteString
                continue
            }

            if status.code == 304 {
                return .notModified(
                    freshFor: freshness(response.headers, spread: spread),
                    meta: answerMeta(status: status, headers: response.headers, url: url, exposing: options.exposeHeaders))
            }

            // The API refused the token (revoked, or expired sooner than it said): one new token and one
            // replay of the request. A second 401 is the source's error, never a loop.
            if status.code == 401, let oauth2 = options.oauth2, let sent = token, isOwnOrigin(url), !replayed {
                replayed = true
                switch await tokens.token(for: oauth2, client: http, rejecting: sent) {
                case .success(let obtained): token = obtained
                case .failure(var error):
                    error.message = "HTTP 401 Unauthorized with the OAuth2 token, and no new one: " + error.message
                    return .failure(error)
                }
                continue
            }

            if status.code >= 400 {
                let detailBytes = response.body.map { Array($0.prefix(min(options.maxBytes, Self.errorBodyLimit))) }
                var error = httpError(status: status, headers: response.headers, body: detailBytes)
                if status.code == 401, replayed { error.message += " (a new OAuth2 token was refused too)" }
                if let heldFor {
                    // The origin's count is used up: nothing is asked of it until the reset, and this says so.
                    let exhausted = RateLimits.exhausted(parsed.host, for: heldFor)
                    error.message += "; " + exhausted.message
                    error.retryAfter = max(error.retryAfter ?? .zero, heldFor)
                    error.transient = true
                }
                return .failure(error)
            }

            guard (200..<300).contains(status.code) else {
                return .failure(SourceError(message: "HTTP \(status.code) \(status.reasonPhrase): not a successful answer", httpStatus: Int(status.code)))
            }
            guard let bytes = response.body else {
                return .failure(
                    SourceError(
                        message: "the answer from \(parsed.host) is larger than maxBytes (\(options.maxBytes) bytes)",
                        code: .tooLarge))
            }
            return .answer(Answer(status: status, headers: response.headers, body: bytes, url: url, spread: spread))
        }
    }

    /// The headers of one request to `url`.
    ///
    /// The configured headers go to the source's own origin (scheme, host, port) and nowhere else: a
    /// redirect or a `Link: rel="next"` that leads elsewhere gets only what any client sends. The plugin
    /// cannot tell which values are secrets (`X-Api-Key: ${KEY}` looks like `Accept: text/plain` by the time
    /// it arrives), so it holds back all of them rather than a list of names that is never complete.
    private func headers(for url: String, bodyDropped: Bool, etag: String?, lastModified: String?, token: String?) -> HTTPHeaders {
        var headers = HTTPHeaders()
        if isOwnOrigin(url) {
            for header in options.headers { headers.add(name: header.name, value: header.value) }
            if let token { headers.replaceOrAdd(name: "Authorization", value: "Bearer " + token) }
            // A redirect that turned the request into a GET took its body away, and the body's type with it.
            if bodyDropped { headers.remove(name: "content-type") }
        }
        if !headers.contains(name: "user-agent") { headers.add(name: "User-Agent", value: Self.userAgent) }
        if let etag { headers.replaceOrAdd(name: "If-None-Match", value: etag) }
        if let lastModified { headers.replaceOrAdd(name: "If-Modified-Since", value: lastModified) }
        return headers
    }

    /// Whether `url` is on the origin the source was configured with. Both sides must parse: a URL that
    /// cannot be compared is another origin.
    private func isOwnOrigin(_ url: String) -> Bool {
        if url == options.url { return true }
        guard let own = configuredURL.origin, let other = URL(string: url).map(originString(of:)) else { return false }
        return own == other
    }

}

/// What any answer, a 304 included, says for the state's `meta`: `httpStatus`, `etag` and `lastModified`
/// when it gives them, `url` (the final one, after redirects) and `headers`, the exposed ones it has.
private func answerMeta(status: HTTPResponseStatus, headers: HTTPHeaders, url: String, exposing names: [String]) -> JSONObject {
    var meta: JSONObject = ["httpStatus": .number(JSONNumber(Int(status.code)))]
    // Each cut, so that no one value can push the whole meta past the protocol's limit (and lose `pages`).
    if let etag = headers.first(name: "etag") { meta["etag"] = .string(prefix(etag, bytes: RESTOptions.maximumExposedValue)) }
    if let lastModified = headers.first(name: "last-modified") {
        meta["lastModified"] = .string(prefix(lastModified, bytes: RESTOptions.maximumExposedValue))
    }
    meta["url"] = .string(prefix(url, bytes: RESTOptions.maximumMetaURL))
    if !names.isEmpty {
        var exposed = JSONObject()
        for name in names {
            let values = headers[name]
            guard !values.isEmpty else { continue }
            exposed[name] = .string(prefix(values.joined(separator: ", "), bytes: RESTOptions.maximumExposedValue))
        }
        // None of them in this answer: nothing said, so a 304 keeps the ones its content came with.
        if !exposed.isEmpty { meta["headers"] = .object(exposed) }
    }
    return meta
}

/// At most `limit` bytes of `text`, cut between Unicode scalars.
func prefix(_ text: String, bytes limit: Int) -> String {
    guard text.utf8.count > limit else { return text }
    var kept = String.UnicodeScalarView()
    var count = 0
    for scalar in text.unicodeScalars {
        count += scalar.utf8.count
        if count > limit { break }
        kept.append(scalar)
    }
    return String(kept)
}

/// What a request to `url` needs of it: the HTTP client's target (nil when it does not parse: the client then
/// says why), its origin (`scheme://host:port`, for the rate limits and for telling whether a redirect leaves
/// the configured origin; nil when it does not parse), and the host that messages name.
struct ParsedURL: Sendable {
    let url: String
    let target: HTTP1Target?
    let origin: String?
    let host: String

    init(_ url: String) {
        self.url = url
        target = try? HTTP1Target(url: url)
        origin = URL(string: url).map(originString(of:))
        host = hostDescription(url)
    }
}

/// `scheme://host:port`, for telling whether a redirect leaves the origin.
private func originString(of url: URL) -> String {
    let scheme = url.scheme?.lowercased() ?? ""
    let port = url.port ?? (scheme == "https" ? 443 : 80)
    return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
}

func nioDeadline(_ deadline: ContinuousClock.Instant) -> NIODeadline {
    // A year is as good as forever here, and keeps the nanoseconds below from overflowing on a huge timeout.
    let remaining = min(ContinuousClock.now.duration(to: deadline), .seconds(365 * 86_400))
    let (seconds, attoseconds) = remaining.components
    let nanoseconds = max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    return .now() + .nanoseconds(nanoseconds)
}

extension JSONValue {
    fileprivate func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        guard var object = objectValue else { return self }
        object[key] = value
        return .object(object)
    }
}

/// The pages a paginated source read last, by URL, with the validators each answer gave: the next load
/// sends them, and a page that answers 304 is taken from here. Only the latest load's pages are kept (a
/// list's memory is the list once more, in the plugin beside the engine's copy), and only for paginated
/// sources.
final class PageMemory: Sendable {
    struct Page: Sendable {
        var items: [JSONValue]
        var etag: String?
        var lastModified: String?
        /// The next page's URL, as this page's answer named it.
        var next: String?
        /// The answer said `Cache-Control: no-store`.
        var noStore = false
        /// The first page's: what its last full answer said, for the `meta` of a load whose first page is a 304.
        var meta: JSONObject? = nil
        var url: String = ""
    }

    private let pages = Mutex<[String: Page]>([:])

    /// The pages kept, by URL; the memory is empty until `keep` (two loads of one source never overlap:
    /// the engine sends the next after the answer).
    func take() -> [String: Page] { pages.withLock { taken in defer { taken = [:] }; return taken } }

    /// A validator for a list of several pages: made of each page's own, nil unless every page has one.
    static func listTag(of read: [Page]) -> String? {
        var validated = ""
        for page in read {
            guard let validator = page.etag ?? page.lastModified else { return nil }
            validated += page.url + "\u{0}" + validator + "\u{0}"
        }
        return "hammock-pages:\(read.count):" + String(FNV1a.hash(validated), radix: 16)
    }

    func keep(_ read: [Page]) {
        var byURL: [String: Page] = [:]
        for page in read { byURL[page.url] = page }
        pages.withLock { $0 = byURL }
    }
}

/// `result` with every string in it (content, validators, an error's message) redacted by `redactor`.
func redacted(_ result: PluginLoadResult, by redactor: Redactor) -> PluginLoadResult {
    guard !redactor.isEmpty else { return result }
    switch result {
    case .newData(let content, let etag, let lastModified):
        return .newData(redactor.redact(content), etag: etag.map { redactor.redact($0) }, lastModified: lastModified.map { redactor.redact($0) })
    case .notModified:
        return result
    case .error(var error):
        error.message = redactor.redact(error.message)
        return .error(error)
    case .fresh(let answer, let duration):
        return .fresh(redacted(answer, by: redactor), for: duration)
    case .described(let answer, let meta):
        guard case .object(let safe) = redactor.redact(JSONValue.object(meta)) else { return redacted(answer, by: redactor) }
        return .described(redacted(answer, by: redactor), meta: safe)
    case .notStored(let answer):
        return .notStored(redacted(answer, by: redactor))
    }
}
