//! Code generation for the Domos SDK: `#[interface]` turns one trait declaration into the client
//! proxy and the server dispatch; `#[derive(Wire)]` gives structs and enums the message encoding.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::{Ident, Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Fields, FnArg, ItemTrait, LitStr, Pat, TraitItem, Type};

/// Declares a portal interface.
///
/// ```ignore
/// #[domos_sdk::interface(version = "1.0")]
/// pub trait Counter {
///     /// Adds `n` and returns the new total.
///     fn add(&self, n: u64) -> Result<u64, CounterError>;
/// }
/// ```
/// Every method takes `&self` and arguments that are owned and implement `Wire`, or borrowed
/// (`&str`, `&[u8]`: `wire::Borrowed`, decoded by the service without an allocation), and returns
/// `Result<T, E>` where `E: From<CallError>`, so that a failed portal call reaches the caller as
/// the method's own error. Generated: `impl Interface for dyn Counter` (name, version, id and the
/// server dispatch), `impl Counter for Portal<dyn Counter>` (the client proxy) and the provided
/// method `into_portal`. Method identifiers are `fnv1a(method name)`. A method marked
/// `#[restartable]` (one whose partial run leaves nothing behind but what a whole run would) is
/// run at once even by a service that may wait, and again the waiting way only if it would wait.
#[proc_macro_attribute]
pub fn interface(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand_interface(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_interface(attr: Tokens, item: Tokens) -> syn::Result<Tokens> {
    let mut version = None;
    syn::meta::parser(|meta| {
        if meta.path.is_ident("version") {
            version = Some(meta.value()?.parse::<LitStr>()?);
            Ok(())
        } else {
            Err(meta.error("expected `version = \"MAJOR.MINOR\"`"))
        }
    })
    .parse2(attr)?;
    let version = version.ok_or_else(|| Error::new(Span::call_site(), "missing `version = \"MAJOR.MINOR\"`"))?;
    let major = version
        .value()
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .ok_or_else(|| Error::new(version.span(), "version must be MAJOR.MINOR"))?;

    let mut tr: ItemTrait = syn::parse2(item)?;
    // `#[restartable]` marks a method for the proxy; the trait itself does not keep it.
    let mut restartable_methods = Vec::new();
    for item in &mut tr.items {
        if let TraitItem::Fn(method) = item {
            let before = method.attrs.len();
            method.attrs.retain(|attr| !attr.path().is_ident("restartable"));
            if method.attrs.len() != before {
                restartable_methods.push(method.sig.ident.clone());
            }
        }
    }
    let name = tr.ident.clone();
    let name_str = name.to_string();
    let interface_id = domos_abi::fnv1a(format!("{name_str}@{major}").as_bytes());

    let mut dispatch_arms = Vec::new();
    let mut proxies = Vec::new();
    let mut method_ids: Vec<(u32, String)> = Vec::new();
    for item in &tr.items {
        let TraitItem::Fn(method) = item else {
            return Err(Error::new(item.span(), "an interface holds only methods"));
        };
        let sig = &method.sig;
        let method_name = sig.ident.to_string();
        let id = domos_abi::fnv1a(method_name.as_bytes());
        if let Some((_, other)) = method_ids.iter().find(|(other_id, _)| *other_id == id) {
            return Err(Error::new(sig.ident.span(), format!("method id collides with `{other}`; rename one")));
        }
        method_ids.push((id, method_name));
        match sig.inputs.first() {
            Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
            _ => return Err(Error::new(sig.span(), "interface methods take `&self`")),
        }
        let mut arg_names = Vec::new();
        // How the dispatch decodes each argument, where it keeps borrowed ones, and how the
        // proxy encodes it: owned arguments as themselves, borrowed ones (`&str`, `&[u8]`)
        // through `Borrowed`, into an `ArgStorage` of the dispatch's frame.
        let mut storages = Vec::new();
        let mut decoded = Vec::new();
        // The generated code's own variables, out of reach of the method's argument names.
        let (encoder, decoder) = (Ident::new("encoder", Span::mixed_site()), Ident::new("decoder", Span::mixed_site()));
        let mut encoded = Vec::new();
        for arg in sig.inputs.iter().skip(1) {
            let FnArg::Typed(pt) = arg else { unreachable!("only the first argument is a receiver") };
            let Pat::Ident(ident) = &*pt.pat else {
                return Err(Error::new(pt.pat.span(), "interface arguments must be plain names"));
            };
            let name = ident.ident.clone();
            match &*pt.ty {
                Type::Reference(reference) if reference.mutability.is_none() => {
                    let elem = &reference.elem;
                    let storage = format_ident!("{name}_storage", span = Span::mixed_site());
                    storages.push(quote! { let mut #storage = ::domos_sdk::wire::ArgStorage::new(); });
                    decoded
                        .push(quote! { <#elem as ::domos_sdk::wire::Borrowed>::decode_into(&mut #storage, #decoder)? });
                    encoded.push(quote! { ::domos_sdk::wire::Borrowed::encode_borrowed(#name, #encoder)?; });
                }
                Type::Reference(reference) => {
                    return Err(Error::new(
                        reference.span(),
                        "interface arguments are owned or `&` borrowed, not `&mut`",
                    ));
                }
                ty => {
                    decoded.push(quote! { <#ty as ::domos_sdk::wire::Wire>::decode(#decoder)? });
                    encoded.push(quote! { ::domos_sdk::wire::Wire::encode(&#name, #encoder)?; });
                }
            }
            arg_names.push(name);
        }
        let syn::ReturnType::Type(_, ret) = &sig.output else {
            return Err(Error::new(sig.span(), "interface methods return Result<T, E> with E: From<CallError>"));
        };
        let ident = &sig.ident;
        let restartable = if restartable_methods.contains(ident) {
            quote! { ::domos_sdk::Restartable::Yes }
        } else {
            quote! { ::domos_sdk::Restartable::No }
        };
        dispatch_arms.push(quote! {
            #id => {
                #(#storages)*
                let (#(#arg_names,)*) = call.args_with(|#decoder| Ok((#(#decoded,)*)))?;
                call.reply(&object.#ident(#(#arg_names),*))
            }
        });
        proxies.push(quote! {
            #sig {
                match self.local() {
                    Some(object) => object.#ident(#(#arg_names),*),
                    None => self
                        .call_remote_encoded::<#ret>(#id, #restartable, |#encoder| {
                            #(#encoded)*
                            Ok(())
                        })
                        .unwrap_or_else(::domos_sdk::rt::FromCallError::from_call_error),
                }
            }
        });
    }

    tr.supertraits.push(syn::parse_quote!(::core::marker::Send));
    tr.supertraits.push(syn::parse_quote!(::core::marker::Sync));
    tr.supertraits.push(syn::parse_quote!('static));
    tr.items.push(syn::parse_quote! {
        /// Makes this object a service: a portal that other domains can be given.
        fn into_portal(self) -> ::domos_sdk::Portal<dyn #name>
        where
            Self: Sized,
        {
            ::domos_sdk::Portal::new(::domos_sdk::rt::Arc::new(self))
        }
    });
    let version_str = version.value();
    Ok(quote! {
        #tr

        impl ::domos_sdk::Interface for dyn #name {
            const NAME: &'static str = #name_str;
            const VERSION: &'static str = #version_str;
            const ID: u32 = #interface_id;
            fn dispatch(
                object: &Self,
                method: u32,
                call: ::domos_sdk::rt::IncomingCall,
            ) -> ::core::result::Result<usize, ::domos_sdk::rt::DispatchError> {
                match method {
                    #(#dispatch_arms)*
                    _ => Err(::domos_sdk::rt::DispatchError::UnknownMethod),
                }
            }
        }

        impl #name for ::domos_sdk::Portal<dyn #name> {
            #(#proxies)*
        }
    })
}

/// Implements `Wire` for a struct or enum: fields in declaration order, enums as a `u32` variant
/// index followed by the variant's fields.
#[proc_macro_derive(Wire)]
pub fn derive_wire(item: TokenStream) -> TokenStream {
    match expand_wire(syn::parse_macro_input!(item as DeriveInput)) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The bindings and the constructor pattern of a set of fields.
fn field_bindings(fields: &Fields) -> (Vec<syn::Ident>, Tokens) {
    match fields {
        Fields::Named(named) => {
            let names: Vec<_> = named.named.iter().filter_map(|f| f.ident.clone()).collect();
            (names.clone(), quote! { { #(#names),* } })
        }
        Fields::Unnamed(unnamed) => {
            let names: Vec<_> = (0..unnamed.unnamed.len()).map(|i| format_ident!("f{i}")).collect();
            (names.clone(), quote! { ( #(#names),* ) })
        }
        Fields::Unit => (Vec::new(), quote! {}),
    }
}

fn expand_wire(input: DeriveInput) -> syn::Result<Tokens> {
    if !input.generics.params.is_empty() {
        return Err(Error::new(input.generics.span(), "#[derive(Wire)] supports types without generic parameters"));
    }
    let name = &input.ident;
    let (encode, decode) = match &input.data {
        Data::Struct(s) => {
            let (names, pattern) = field_bindings(&s.fields);
            (
                quote! {
                    let #name #pattern = self;
                    #( ::domos_sdk::wire::Wire::encode(#names, encoder)?; )*
                    Ok(())
                },
                quote! {
                    #( let #names = ::domos_sdk::wire::Wire::decode(decoder)?; )*
                    Ok(#name #pattern)
                },
            )
        }
        Data::Enum(e) => {
            let mut encode_arms = Vec::new();
            let mut decode_arms = Vec::new();
            for (index, variant) in e.variants.iter().enumerate() {
                let index = index as u32;
                let vname = &variant.ident;
                let (names, pattern) = field_bindings(&variant.fields);
                encode_arms.push(quote! {
                    #name::#vname #pattern => {
                        ::domos_sdk::wire::Wire::encode(&#index, encoder)?;
                        #( ::domos_sdk::wire::Wire::encode(#names, encoder)?; )*
                        Ok(())
                    }
                });
                decode_arms.push(quote! {
                    #index => {
                        #( let #names = ::domos_sdk::wire::Wire::decode(decoder)?; )*
                        Ok(#name::#vname #pattern)
                    }
                });
            }
            (
                quote! { match self { #(#encode_arms)* } },
                quote! {
                    match <u32 as ::domos_sdk::wire::Wire>::decode(decoder)? {
                        #(#decode_arms)*
                        _ => Err(::domos_sdk::wire::DecodeError::Invalid),
                    }
                },
            )
        }
        Data::Union(u) => {
            return Err(Error::new(u.union_token.span(), "unions cannot cross a portal"));
        }
    };
    Ok(quote! {
        impl ::domos_sdk::wire::Wire for #name {
            fn encode(&self, encoder: &mut ::domos_sdk::wire::Encoder<'_>) -> ::core::result::Result<(), ::domos_sdk::wire::EncodeError> {
                #encode
            }
            fn decode(decoder: &mut ::domos_sdk::wire::Decoder<'_>) -> ::core::result::Result<Self, ::domos_sdk::wire::DecodeError> {
                #decode
            }
        }
    })
}
