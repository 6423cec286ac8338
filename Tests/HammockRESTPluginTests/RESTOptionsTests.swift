import HammockJSON
import HammockPluginKit
import Testing

@testable import HammockRESTPlugin

/// A rest source's options, in-process: what each key gives and every way it can be wrong.
@Suite struct RESTOptionsTests {
    private func problems(_ options: JSONValue) -> [String: String]? {
        do {
            _ = try RESTOptions(options)
            return nil
        } catch {
            return Dictionary(error.problems.map { ($0.pointer.description, $0.message) }, uniquingKeysWith: { $0 + "; " + $1 })
        }
    }

    @Test func aURLAloneTakesTheDefaults() throws {
        let options = try RESTOptions(["url": "https://api.example.com/items"])
        #expect(options.url == "https://api.example.com/items")
        #expect(options.method == "GET")
        #expect(options.headers.isEmpty)
        #expect(options.body == nil)
        #expect(options.parse == nil)
        #expect(options.maxBytes == 10 << 20)
        #expect(options.followRedirects)
        #expect(options.paginate == nil)
    }

    @Test func everyKeySet() throws {
        let options = try RESTOptions([
            "url": "http://127.0.0.1:8080/a?x=1#top", "method": "post", "headers": ["X-Token": "t", "Accept": "text/plain"],
            "query": ["q": "a b&c", "n": 2], "body": "raw", "parse": "text", "maxBytes": "1MiB", "followRedirects": false,
        ])
        #expect(options.url == "http://127.0.0.1:8080/a?x=1&q=a%20b%26c&n=2#top")
        #expect(options.method == "POST")
        #expect(options.headers.map(\.name) == ["X-Token", "Accept"])
        #expect(options.headers.map(\.value) == ["t", "text/plain"])
        #expect(options.body == Array("raw".utf8))
        #expect(options.parse == .text)
        #expect(options.maxBytes == 1 << 20)
        #expect(!options.followRedirects)
    }

    @Test func aMappingBodyIsSentAsJSONWithItsContentType() throws {
        let options = try RESTOptions(["url": "https://h/", "method": "PUT", "body": ["a": [1, "x"]]])
        #expect(options.body == Array(#"{"a":[1,"x"]}"#.utf8))
        #expect(options.headers.map(\.name) == ["Content-Type"])
        #expect(options.headers.map(\.value) == ["application/json"])
        // A Content-Type of the user's own is left alone, whatever its case.
        let own = try RESTOptions(["url": "https://h/", "method": "PUT", "body": [1], "headers": ["content-type": "application/x"]])
        #expect(own.headers.map(\.value) == ["application/x"])
    }

    @Test func aHeaderWithAnEmptyValueIsLeftOut() throws {
        let options = try RESTOptions(["url": "https://h/", "headers": ["X-Token": "", "Accept": "a"]])
        #expect(options.headers.map(\.name) == ["Accept"])
    }

    @Test func theURLMustBeHTTP() {
        #expect(problems([:]) == ["/url": #"missing required key "url""#])
        #expect(problems(["url": ""]) == ["/url": "url must not be empty"])
        for space in [" ", "\t", "\n", "\r\n"] {
            #expect(problems(["url": .string("https://h/a\(space)b")]) == ["/url": "url must not contain spaces (write them as %20)"])
        }
        #expect(problems(["url": "ftp://h/"]) == ["/url": #"url must start with http:// or https://, found "ftp:""#])
        #expect(problems(["url": "example.com/a"]) == ["/url": #"url "example.com/a" is not a URL (expected http://… or https://…)"#])
        #expect(problems(["url": "https:///a"]) == ["/url": #"url "https:///a" has no host"#])
        #expect(problems(["url": 5]) == ["/url": "url must be a string, found a number"])
    }

    @Test func templatesInTheURLAreCheckedWhenFilledIn() {
        #expect(problems(["url": "https://{{ host.name }}/a"]) == nil)
        #expect(problems(["url": "{{ repo.url }}/extra"]) == nil)
        #expect(problems(["url": "{{ repo.url }}/a b"]) == ["/url": "url must not contain spaces (write them as %20)"])
        #expect(problems(["url": "ftp://{{ host }}/"]) == ["/url": #"url must start with http:// or https://, found "ftp:""#])
    }

    @Test func badMethodsHeadersAndBodies() {
        #expect(problems(["url": "https://h/", "method": "PSOT"]) == [
            "/method": #"method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, found "PSOT" (did you mean "POST"?)"#
        ])
        #expect(problems(["url": "https://h/", "method": "FETCH"]) == [
            "/method": #"method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, found "FETCH""#
        ])
        #expect(problems(["url": "https://h/", "headers": ["Bad Name": "x", "X-Ok": "a\r\nInjected: 1"]]) == [
            "/headers/Bad Name": #""Bad Name" is not a valid HTTP header name"#,
            "/headers/X-Ok": "the value of header X-Ok must be one line",
        ])
        for breaking in ["\n", "\r", "\0"] {
            #expect(problems(["url": "https://h/", "headers": ["X": .string("a\(breaking)b")]]) == ["/headers/X": "the value of header X must be one line"])
        }
        #expect(problems(["url": "https://h/", "headers": ["A": ["x"]]]) == ["/headers/A": "headers.A must be a string, found an array"])
        #expect(problems(["url": "https://h/", "body": 5]) == [
            "/body": "body must be a string (sent as it is) or a mapping or list (sent as JSON), found a number"
        ])
        #expect(problems(["url": "https://h/", "method": "HEAD", "body": "x"]) == ["/body": "a HEAD request has no body"])
        #expect(problems(["url": "https://h/", "parse": "xml", "followRedirects": "no"]) == [
            "/parse": #"parse must be one of json, jsonl, text, found "xml""#,
            "/followRedirects": "followRedirects must be true or false, found a string",
        ])
        #expect(problems(["url": "https://h/", "query": ["a": nil]]) == ["/query/a": "query.a must be a string, found null"])
    }

    @Test func optionsThatAreNoMapping() {
        #expect(problems("https://h/") == [
            "": "the options of a rest source must be a mapping, found a string",
            "/url": #"missing required key "url""#,
        ])
    }

    @Test func anUnknownKeyGetsAHint() {
        #expect(problems(["url": "https://h/", "header": ["a": "b"]]) == [
            "/header": #"unknown key "header" in a rest source (did you mean "headers"?)"#
        ])
    }

    // MARK: paginate

    @Test func paginateByLinkOrByPage() throws {
        let link = try #require(try RESTOptions(["url": "https://h/", "paginate": ["style": "link", "limit": 50]]).paginate)
        guard case .link = link.style else {
            Issue.record("not link: \(link.style)")
            return
        }
        #expect(link.limit == 50)
        #expect(link.maxPages == 100)

        let page = try #require(try RESTOptions(["url": "https://h/", "paginate": ["style": "page"]]).paginate)
        guard case .page(let param, let start, let sizeParam, let size) = page.style else {
            Issue.record("not page: \(page.style)")
            return
        }
        #expect(param == "page")
        #expect(start == 1)
        #expect(sizeParam == nil)
        #expect(size == nil)

        let sized = try #require(
            try RESTOptions([
                "url": "https://h/",
                "paginate": ["style": "page", "param": "p", "start": 0, "sizeParam": "per_page", "size": 30, "maxPages": 5],
            ]).paginate)
        guard case .page(let sizedParam, let sizedStart, let sizedSizeParam, let sizedSize) = sized.style else {
            Issue.record("not page: \(sized.style)")
            return
        }
        #expect(sizedParam == "p")
        #expect(sizedStart == 0)
        #expect(sizedSizeParam == "per_page")
        #expect(sizedSize == 30)
        #expect(sized.maxPages == 5)
    }

    @Test func paginateProblems() {
        func paginate(_ value: JSONValue, parse: JSONValue? = nil, method: String = "GET") -> [String: String]? {
            var options: JSONObject = ["url": "https://h/", "paginate": value, "method": .string(method)]
            if let parse { options["parse"] = parse }
            return problems(.object(options))
        }
        #expect(paginate("link") == [
            "/paginate": "paginate must be a mapping such as { style: link } or { style: page, param: page }, found a string"
        ])
        #expect(paginate([:]) == ["/paginate": "paginate needs a style: link or page"])
        #expect(paginate(["style": "pages"]) == ["/paginate/style": #"paginate.style must be link or page, found "pages" (did you mean "page"?)"#])
        #expect(paginate(["style": 1]) == ["/paginate/style": "paginate.style must be a non-empty string, found a number"])
        #expect(paginate(["style": "link", "param": "p", "size": 3]) == [
            "/paginate/param": "paginate.param is for style: page; style: link follows the Link header",
            "/paginate/size": "paginate.size is for style: page; style: link follows the Link header",
        ])
        #expect(paginate(["style": "page", "sizeParam": "n"]) == [
            "/paginate/sizeParam": "paginate.sizeParam needs paginate.size, the page size to ask for"
        ])
        #expect(paginate(["style": "page", "start": -1, "size": 0, "limit": 2_000_000_000]) == [
            "/paginate/start": "paginate.start must be a whole number from 0 to 1000000000",
            "/paginate/size": "paginate.size must be a whole number from 1 to 1000000000",
            "/paginate/limit": "paginate.limit must be a whole number from 1 to 1000000000",
        ])
        #expect(paginate(["style": "link", "maxpages": 3]) == [
            "/paginate/maxpages": #"unknown key "maxpages" in paginate (did you mean "maxPages"?)"#
        ])
        #expect(paginate(["style": "link"], parse: "text") == ["/parse": "parse: text does not work with paginate, which joins JSON arrays"])
        #expect(paginate(["style": "link"], method: "HEAD") == ["/paginate": "a HEAD request has no pages"])
    }
}

/// Building the URLs of a request and of its pages, in-process.
@Suite struct QueryTests {
    @Test func appendingAQueryKeepsTheFragmentLast() {
        #expect("https://h/a".appendingQuery("x=1") == "https://h/a?x=1")
        #expect("https://h/a?".appendingQuery("x=1") == "https://h/a?x=1")
        #expect("https://h/a?y=2".appendingQuery("x=1") == "https://h/a?y=2&x=1")
        #expect("https://h/a?y=2&".appendingQuery("x=1") == "https://h/a?y=2&x=1")
        #expect("https://h/a#frag".appendingQuery("x=1") == "https://h/a?x=1#frag")
    }

    @Test func settingAParameterReplacesItWhereverItWas() {
        #expect("https://h/a".settingQueryParameter("page", to: "2") == "https://h/a?page=2")
        #expect("https://h/a?page=1&q=x".settingQueryParameter("page", to: "2") == "https://h/a?q=x&page=2")
        #expect("https://h/a?page&q=x#f".settingQueryParameter("page", to: "3") == "https://h/a?q=x&page=3#f")
        #expect("https://h/a?pages=9".settingQueryParameter("page", to: "1") == "https://h/a?pages=9&page=1")
        #expect("https://h/a".settingQueryParameter("per page", to: "a&b") == "https://h/a?per%20page=a%26b")
    }
}

/// `auth:`: basic and bearer, as the Authorization header, and every way it can be written wrong.
@Suite struct RESTAuthOptionsTests {
    private func problems(_ options: JSONValue) -> [String: String] {
        do {
            _ = try RESTOptions(options)
            return [:]
        } catch {
            return Dictionary(error.problems.map { ($0.pointer.description, $0.message) }, uniquingKeysWith: { $0 + "; " + $1 })
        }
    }

    @Test func basicAndBearerBecomeTheAuthorizationHeader() throws {
        let basic = try RESTOptions(["url": "https://h/", "auth": ["basic": ["username": "Aladdin", "password": "open sesame"]]])
        // RFC 7617's own example.
        #expect(basic.headers.map(\.name) == ["Authorization"])
        #expect(basic.headers.map(\.value) == ["Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="])
        let bearer = try RESTOptions(["url": "https://h/", "auth": ["bearer": "abc.def"], "headers": ["Accept": "x/y"]])
        #expect(bearer.headers.map(\.name) == ["Accept", "Authorization"])
        #expect(bearer.headers.last?.value == "Bearer abc.def")
        // Like an empty header value: `${TOKEN:-}` with TOKEN unset sends nothing.
        #expect(try RESTOptions(["url": "https://h/", "auth": ["bearer": ""]]).headers.isEmpty)
        // A password may be empty; the colon is still sent.
        let noPassword = try RESTOptions(["url": "https://h/", "auth": ["basic": ["username": "u"]]])
        #expect(noPassword.headers.first?.value == "Basic dTo=")
    }

    @Test func mistakesAreNamedAtTheirKey() {
        #expect(problems(["url": "https://h/", "auth": "token"])["/auth"]?.hasPrefix("auth must be a mapping with one of basic, bearer") == true)
        #expect(problems(["url": "https://h/", "auth": ["berer": "t"]])["/auth/berer"] == #"unknown auth scheme "berer" (did you mean "bearer"?); use basic, bearer or oauth2"#)
        #expect(problems(["url": "https://h/", "auth": ["basic": ["usrname": "u", "password": "p"]]])["/auth/basic/usrname"]?.contains(#"did you mean "username"?"#) == true)
        #expect(problems(["url": "https://h/", "auth": ["basic": ["username": "a:b", "password": "p"]]])["/auth/basic/username"] == #"auth.basic.username may not contain ":""#)
        #expect(problems(["url": "https://h/", "auth": ["bearer": "two words"]])["/auth/bearer"] == "auth.bearer must be one word of visible ASCII characters")
        #expect(problems(["url": "https://h/", "auth": ["bearer": "t"], "headers": ["authorization": "x"]])["/auth"]
            == "auth and headers.Authorization both set the Authorization header; keep one")
        #expect(problems(["url": "https://h/", "auth": ["bearer": "t", "basic": ["username": "u"]]])["/auth"] != nil)
    }

    @Test func parseJSONLinesIsAChoice() throws {
        #expect(try RESTOptions(["url": "https://h/", "parse": "jsonl"]).parse == .jsonl)
    }
}
