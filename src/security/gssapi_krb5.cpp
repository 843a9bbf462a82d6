// The GSS-API calls of SASL GSSAPI, from MIT Kerberos (libgssapi_krb5), built only when kgroup
// has it (KGROUP_GSSAPI). Nothing outside this file sees a GSS-API or krb5 type.
//
// Credentials, per client (one kerberos_login, shared by its connections):
//   - sasl.kerberos.keytab (with sasl.kerberos.principal): gss_acquire_cred_from with the cred
//     store {client_keytab: the keytab, ccache: a MEMORY cache of this login}, for each security
//     context. MIT Kerberos gets a ticket from the keytab when the cache has none, and a new one
//     when the ticket is due for refresh (its "client keytab" refresh, done when credentials are
//     acquired), so tickets are renewed without a kinit and without touching the user's own
//     ticket cache.
//   - sasl.kerberos.principal without a keytab: that principal's ticket in the default cache
//     (KRB5CCNAME, kept fresh by kinit or k5start outside kgroup).
//   - neither: GSS-API's default credentials (the default cache; MIT also honours
//     KRB5_CLIENT_KTNAME, the default client keytab).
// These calls may contact the KDC (blocking, within krb5.conf's timeouts): on the client's
// background thread, once per ticket, not per request.
#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#include <krb5.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <utility>

#include "security/gssapi.hpp"

namespace kgroup::security {

namespace {

// The text of a GSS status code (GSS_C_GSS_CODE or GSS_C_MECH_CODE), all of its messages.
std::string status_text(OM_uint32 code, int type) {
  std::string out;
  OM_uint32 ctx = 0;
  do {
    OM_uint32 minor = 0;
    gss_buffer_desc msg = GSS_C_EMPTY_BUFFER;
    const OM_uint32 major = gss_display_status(&minor, code, type, gss_mech_krb5, &ctx, &msg);
    if (GSS_ERROR(major)) break;
    if (!out.empty()) out += "; ";
    out.append(static_cast<const char*>(msg.value), msg.length);
    gss_release_buffer(&minor, &msg);
  } while (ctx != 0);
  return out;
}

gss_result failure(const char* call, OM_uint32 major, OM_uint32 minor) {
  gss_result r;
  r.error = std::string(call) + ": " + status_text(major, GSS_C_GSS_CODE);
  if (minor != 0) r.error += " (" + status_text(minor, GSS_C_MECH_CODE) + ")";
  const auto m = static_cast<krb5_error_code>(minor);
  r.retriable = m == KRB5_KDC_UNREACH || m == KRB5KDC_ERR_SVC_UNAVAILABLE || m == KRB5_REALM_CANT_RESOLVE;
  return r;
}

gss_buffer_desc buffer_of(std::span<const std::uint8_t> s) {
  gss_buffer_desc b;
  b.length = s.size();
  b.value = const_cast<std::uint8_t*>(s.data());
  return b;
}

protocol::bytes take(gss_buffer_desc& b) {
  protocol::bytes out(static_cast<const std::uint8_t*>(b.value),
                      static_cast<const std::uint8_t*>(b.value) + b.length);
  OM_uint32 minor = 0;
  gss_release_buffer(&minor, &b);
  return out;
}

// A credential handle, released when the login and every context that uses it are done with it.
struct credential {
  gss_cred_id_t handle = GSS_C_NO_CREDENTIAL;  // GSS_C_NO_CREDENTIAL: the default credentials
  credential() = default;
  credential(const credential&) = delete;
  credential& operator=(const credential&) = delete;
  ~credential() {
    OM_uint32 minor = 0;
    if (handle != GSS_C_NO_CREDENTIAL) gss_release_cred(&minor, &handle);
  }
};

class krb5_login : public kerberos_login, public std::enable_shared_from_this<krb5_login> {
 public:
  explicit krb5_login(kerberos_settings s) : settings_(std::move(s)) {
    static std::atomic<unsigned> counter{0};
    if (!settings_.keytab.empty()) {
      ccache_ = "MEMORY:kgroup-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    }
  }

  ~krb5_login() override {
    // (No context outlives its login: each holds the login.)
    if (!ccache_.empty()) {
      // The MEMORY cache lives until destroyed: not one per client for the life of the process.
      krb5_context k = nullptr;
      if (krb5_init_context(&k) == 0) {
        krb5_ccache cc = nullptr;
        if (krb5_cc_resolve(k, ccache_.c_str(), &cc) == 0) krb5_cc_destroy(k, cc);
        krb5_free_context(k);
      }
    }
  }

  std::unique_ptr<gss_context> context_for(const std::string& host) override;

  // The credential handle for a new context, acquired for each: acquiring is where MIT Kerberos
  // gets a ticket from the client keytab when the cache has none or its ticket is due for refresh
  // (past half its life, or ending within 30 s); a handle kept for good would go on using an
  // expired ticket. The MEMORY cache keeps the tickets between acquisitions, so this reads the
  // cache and reaches the KDC only when a ticket is due. GSS_C_NO_CREDENTIAL stands for the
  // default credentials.
  gss_result credentials(std::shared_ptr<credential>& out) {
    std::lock_guard lock(mutex_);
    gss_result r;
    r.ok = true;
    auto c = std::make_shared<credential>();
    if (settings_.keytab.empty() && settings_.principal.empty()) {
      out = std::move(c);
      return r;
    }
    OM_uint32 minor = 0;
    gss_name_t name = GSS_C_NO_NAME;
    if (!settings_.principal.empty()) {
      gss_buffer_desc n;
      n.value = settings_.principal.data();
      n.length = settings_.principal.size();
      const OM_uint32 major = gss_import_name(&minor, &n, GSS_KRB5_NT_PRINCIPAL_NAME, &name);
      if (GSS_ERROR(major)) return failure("gss_import_name(sasl.kerberos.principal)", major, minor);
    }
    gss_OID_set_desc mechs{1, const_cast<gss_OID>(gss_mech_krb5)};
    OM_uint32 major = 0;
    if (!settings_.keytab.empty()) {
      gss_key_value_element_desc elements[] = {{"client_keytab", settings_.keytab.c_str()},
                                               {"ccache", ccache_.c_str()}};
      gss_key_value_set_desc store{2, elements};
      major = gss_acquire_cred_from(&minor, name, GSS_C_INDEFINITE, &mechs, GSS_C_INITIATE, &store,
                                    &c->handle, nullptr, nullptr);
    } else {
      major = gss_acquire_cred(&minor, name, GSS_C_INDEFINITE, &mechs, GSS_C_INITIATE, &c->handle, nullptr,
                               nullptr);
    }
    OM_uint32 ignored = 0;
    if (name != GSS_C_NO_NAME) gss_release_name(&ignored, &name);
    if (GSS_ERROR(major)) {
      c->handle = GSS_C_NO_CREDENTIAL;
      // (The principal and the keytab's path name no secret; MIT's text for a keytab without the
      // principal, "No credentials cache found", does not say which.)
      const std::string call = settings_.keytab.empty() ? "gss_acquire_cred(" + settings_.principal + ")"
                                                        : "gss_acquire_cred_from(" + settings_.principal +
                                                              ", client keytab " + settings_.keytab + ")";
      return failure(call.c_str(), major, minor);
    }
    out = std::move(c);
    return r;
  }

  const kerberos_settings& settings() const { return settings_; }

 private:
  kerberos_settings settings_;
  std::string ccache_;
  std::mutex mutex_;
};

class krb5_gss_context : public gss_context {
 public:
  krb5_gss_context(std::shared_ptr<krb5_login> login, std::string host)
      : login_(std::move(login)), host_(std::move(host)) {}
  ~krb5_gss_context() override {
    OM_uint32 minor = 0;
    if (ctx_ != GSS_C_NO_CONTEXT) gss_delete_sec_context(&minor, &ctx_, GSS_C_NO_BUFFER);
    if (target_ != GSS_C_NO_NAME) gss_release_name(&minor, &target_);
  }
  krb5_gss_context(const krb5_gss_context&) = delete;
  krb5_gss_context& operator=(const krb5_gss_context&) = delete;

  gss_result init(std::span<const std::uint8_t> input) override {
    OM_uint32 minor = 0;
    if (target_ == GSS_C_NO_NAME) {
      gss_result c = login_->credentials(cred_);
      if (!c.ok) return c;
      std::string service = login_->settings().service_name + "@" + host_;
      gss_buffer_desc n;
      n.value = service.data();
      n.length = service.size();
      const OM_uint32 major = gss_import_name(&minor, &n, GSS_C_NT_HOSTBASED_SERVICE, &target_);
      if (GSS_ERROR(major)) {
        target_ = GSS_C_NO_NAME;
        return failure("gss_import_name(sasl.kerberos.service.name@host)", major, minor);
      }
    }
    gss_buffer_desc in = buffer_of(input);
    gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
    const OM_uint32 major = gss_init_sec_context(
        &minor, cred_->handle, &ctx_, target_, const_cast<gss_OID>(gss_mech_krb5),
        GSS_C_MUTUAL_FLAG | GSS_C_INTEG_FLAG, GSS_C_INDEFINITE, GSS_C_NO_CHANNEL_BINDINGS,
        input.empty() ? GSS_C_NO_BUFFER : &in, nullptr, &out, nullptr, nullptr);
    if (GSS_ERROR(major)) {
      OM_uint32 ignored = 0;
      gss_release_buffer(&ignored, &out);  // a failed step can still hand back a token
      return failure("gss_init_sec_context", major, minor);
    }
    gss_result r;
    r.ok = true;
    r.complete = (major & GSS_S_CONTINUE_NEEDED) == 0;
    r.token = take(out);
    return r;
  }

  gss_result unwrap(std::span<const std::uint8_t> input) override {
    OM_uint32 minor = 0;
    gss_buffer_desc in = buffer_of(input);
    gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
    const OM_uint32 major = gss_unwrap(&minor, ctx_, &in, &out, nullptr, nullptr);
    if (GSS_ERROR(major)) return failure("gss_unwrap", major, minor);
    gss_result r;
    r.ok = true;
    r.token = take(out);
    return r;
  }

  gss_result wrap(std::span<const std::uint8_t> message) override {
    OM_uint32 minor = 0;
    gss_buffer_desc in = buffer_of(message);
    gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
    const OM_uint32 major =
        gss_wrap(&minor, ctx_, 0 /* integrity only */, GSS_C_QOP_DEFAULT, &in, nullptr, &out);
    if (GSS_ERROR(major)) return failure("gss_wrap", major, minor);
    gss_result r;
    r.ok = true;
    r.token = take(out);
    return r;
  }

 private:
  std::shared_ptr<krb5_login> login_;
  std::string host_;
  std::shared_ptr<credential> cred_;
  gss_name_t target_ = GSS_C_NO_NAME;
  gss_ctx_id_t ctx_ = GSS_C_NO_CONTEXT;
};

std::unique_ptr<gss_context> krb5_login::context_for(const std::string& host) {
  return std::make_unique<krb5_gss_context>(shared_from_this(), host);
}

}  // namespace

bool kerberos_available() noexcept {
  return true;
}

std::shared_ptr<kerberos_login> make_kerberos_login(const kerberos_settings& settings, std::string& error) {
  if (!settings.keytab.empty()) {
    if (settings.principal.empty()) {
      error = "sasl.kerberos.keytab needs sasl.kerberos.principal (the keytab's client principal)";
      return nullptr;
    }
    std::ifstream f(settings.keytab, std::ios::binary);
    char first = 0;
    if (!f || !f.get(first)) {
      error = "sasl.kerberos.keytab: cannot read '" + settings.keytab + "'";
      return nullptr;
    }
    if (first != 5) {  // MIT keytab files start with 0x05 0x01 or 0x05 0x02
      error = "sasl.kerberos.keytab: '" + settings.keytab + "' is not a Kerberos keytab file";
      return nullptr;
    }
  }
  if (settings.service_name.empty()) {
    error = "sasl.kerberos.service.name must not be empty";
    return nullptr;
  }
  return std::make_shared<krb5_login>(settings);
}

}  // namespace kgroup::security
