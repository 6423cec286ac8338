import FoundationEssentials
import HammockCore
import HammockJSON
import HammockPluginKit

/// `auth: { oauth2: { token-url, client-id, client-secret, scope, grant, refresh-token, client-auth, cache } }`:
/// where and how the plugin gets an access token for a source (see `OAuth2Tokens`).
struct OAuth2Options: Sendable, Hashable {
    enum Grant: String, Sendable, CaseIterable {
        case clientCredentials = "client_credentials"
        case refreshToken = "refresh_token"
    }

    /// How the client authenticates itself to the token endpoint (RFC 6749 §2.3.1).
    enum ClientAuth: String, Sendable, CaseIterable {
        /// `Authorization: Basic` of the form-encoded id and secret: the way every server must accept.
        case basic
        /// `client_id` and `client_secret` in the form body, for servers that only read them there.
        case body
    }

    static let keys = ["token-url", "client-id", "client-secret", "scope", "grant", "refresh-token", "client-auth", "params", "cache"]
    /// The form fields hammock writes itself, which `params` may not set.
    static let reservedParams = ["grant_type", "client_id", "client_secret", "refresh_token", "scope"]

    /// One more field of the token request's form (`audience`, `resource`).
    struct Param: Sendable, Hashable {
        var name: String
        var value: String
    }

    var tokenURL: String
    var clientID: String
    /// Absent: a public client (only with `grant: refresh_token`), which sends its `client_id` in the body.
    var clientSecret: String?
    var scope: String?
    var grant: Grant
    /// The refresh token the configuration gives (`grant: refresh_token`).
    var refreshToken: String?
    var clientAuth: ClientAuth
    /// More fields of the token request's form, in the order written: what some servers need besides the
    /// standard ones (Auth0's `audience`, Azure AD v1's `resource`).
    var params: [Param] = []
    /// Keep the token in a file of the offline cache folder too (mode 0600), so a restart reuses it.
    var cache: Bool

    /// Reads `auth.oauth2`. Secrets (the client secret, the refresh token) are never quoted in a problem.
    static func read(_ value: JSONValue, _ reader: inout OptionReader) -> OAuth2Options? {
        func at(_ key: String) -> JSONPointer { JSONPointer(tokens: ["auth", "oauth2", key]) }
        guard let object = value.objectValue else {
            reader.problem(
                at: JSONPointer(tokens: ["auth", "oauth2"]),
                "auth.oauth2 must be a mapping with token-url, client-id and client-secret, found \(value.kindName)")
            return nil
        }
        var valid = true
        for key in object.keys where !keys.contains(key) {
            reader.problem(at: at(key), unknownKeyMessage(key, known: keys, context: "auth.oauth2"))
            valid = false
        }
        func string(_ key: String, required: Bool = false) -> String? {
            guard let item = object[key] else {
                if required {
                    reader.problem(at: JSONPointer(tokens: ["auth", "oauth2"]), "auth.oauth2 needs \(key) (a string)")
                    valid = false
                }
                return nil
            }
            guard let text = item.stringValue else {
                reader.problem(at: at(key), "auth.oauth2.\(key) must be a string, found \(item.kindName)")
                valid = false
                return nil
            }
            return text
        }
        /// A value that goes into a request as it is: no control characters (it would break the form or the
        /// header), and not empty. Never quoted.
        func credential(_ key: String, required: Bool = false) -> String? {
            guard let text = string(key, required: required) else { return nil }
            if text.isEmpty {
                reader.problem(at: at(key), "auth.oauth2.\(key) is empty")
                valid = false
                return nil
            }
            if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                reader.problem(at: at(key), "auth.oauth2.\(key) may not hold control characters")
                valid = false
                return nil
            }
            return text
        }

        let tokenURL = string("token-url", required: true)
        if let tokenURL {
            if tokenURL.contains("{{") {
                reader.problem(at: at("token-url"), "auth.oauth2.token-url may not hold {{ templates }}")
                valid = false
            } else if let problem = RESTOptions.urlProblem(tokenURL) {
                reader.problem(at: at("token-url"), "auth.oauth2.token-url: " + (problem.hasPrefix("url ") ? String(problem.dropFirst(4)) : problem))
                valid = false
            }
        }
        let clientID = credential("client-id", required: true)
        let clientSecret = credential("client-secret")
        let scope = string("scope")
        if let scope, scope.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            reader.problem(at: at("scope"), "auth.oauth2.scope may not hold control characters")
            valid = false
        }
        var grant = Grant.clientCredentials
        if let name = string("grant") {
            if let chosen = Grant(rawValue: name) {
                grant = chosen
            } else {
                let names = Grant.allCases.map(\.rawValue)
                reader.problem(
                    at: at("grant"),
                    "auth.oauth2.grant must be \(names.joined(separator: " or ")), found \"\(name)\"\(didYouMean(name, among: names))")
                valid = false
            }
        }
        let refreshToken = credential("refresh-token")
        var clientAuth = ClientAuth.basic
        if let name = string("client-auth") {
            if let chosen = ClientAuth(rawValue: name) {
                clientAuth = chosen
            } else {
                let names = ClientAuth.allCases.map(\.rawValue)
                reader.problem(
                    at: at("client-auth"),
                    "auth.oauth2.client-auth must be basic or body, found \"\(name)\"\(didYouMean(name, among: names))")
                valid = false
            }
        }
        var params: [Param] = []
        if let item = object["params"] {
            if let fields = item.objectValue {
                for (name, value) in fields {
                    let pointer = JSONPointer(tokens: ["auth", "oauth2", "params", name])
                    if name.isEmpty || Self.reservedParams.contains(name) {
                        reader.problem(at: pointer, "auth.oauth2.params may not set \"\(name)\": hammock writes it (use the option of its own)")
                        valid = false
                        continue
                    }
                    // A value may be a secret: never quoted.
                    let text: String? =
                        switch value {
                        case .string(let text): text
                        case .number(let number): number.text
                        case .bool(let flag): flag ? "true" : "false"
                        default: nil
                        }
                    guard let text, !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                        reader.problem(at: pointer, "auth.oauth2.params.\(name) must be a one-line string, number or boolean")
                        valid = false
                        continue
                    }
                    params.append(Param(name: name, value: text))
                }
            } else {
                reader.problem(at: at("params"), "auth.oauth2.params must be a mapping of form fields, e.g. { audience: https://api.example.com }, found \(item.kindName)")
                valid = false
            }
        }
        var cache = false
        if let item = object["cache"] {
            if let flag = item.boolValue {
                cache = flag
            } else {
                reader.problem(at: at("cache"), "auth.oauth2.cache must be true or false, found \(item.kindName)")
                valid = false
            }
        }
        switch grant {
        case .clientCredentials:
            if object["client-secret"] == nil {
                reader.problem(at: JSONPointer(tokens: ["auth", "oauth2"]), "auth.oauth2 needs client-secret for grant: client_credentials")
                valid = false
            }
            if object["refresh-token"] != nil {
                reader.problem(at: at("refresh-token"), "auth.oauth2.refresh-token is for grant: refresh_token")
                valid = false
            }
        case .refreshToken:
            if object["refresh-token"] == nil {
                reader.problem(at: JSONPointer(tokens: ["auth", "oauth2"]), "auth.oauth2 needs refresh-token for grant: refresh_token")
                valid = false
            }
        }
        guard valid, let tokenURL, let clientID else { return nil }
        return OAuth2Options(
            tokenURL: tokenURL, clientID: clientID, clientSecret: clientSecret, scope: scope.flatMap { $0.isEmpty ? nil : $0 },
            grant: grant, refreshToken: refreshToken, clientAuth: clientAuth, params: params, cache: cache)
    }
}
